"""A generated memory corpus with questions, for the memory search benchmarks (issue 35).

Facts about made-up people, in English and Japanese, written as session log lines, each
with two questions whose answer is that line:

- `paraphrase`: asks for the fact in other words ("does Aiko own any animals?" for
  "Aiko adopted a kitten named Mochi last spring"): the lexical leg, which needs every
  word of the question in the line, mostly cannot find these;
- `keyword`: the fact's own rare word ("Mochi"): what full-text search is made for.

Plus filler lines (small talk, tool output) that answer nothing. Everything comes from
a fixed seed, so two runs measure the same set.

    lines, questions = corpus(people=40, filler=400, seed=35)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

EN_NAMES = [
    "Aiko", "Bruno", "Chloe", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ines", "Jonas",
    "Kenji", "Lena", "Marco", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tariq",
    "Uma", "Viktor", "Wanda", "Xavier", "Yusuf", "Zoe", "Amara", "Bastian", "Celia", "Dario",
]  # fmt: skip
JA_NAMES = [
    "佐藤", "鈴木", "高橋", "田中", "伊藤", "渡辺", "山本", "中村", "小林", "加藤",
    "吉田", "山田", "佐々木", "山口", "松本", "井上", "木村", "林", "清水", "山崎",
]  # fmt: skip
PETS = ["Mochi", "Biscuit", "Pixel", "Nori", "Pepper", "Tofu", "Comet", "Maple", "Ziggy", "Olive"]
CITIES = ["Lisbon", "Oslo", "Nairobi", "Osaka", "Montreal", "Valparaiso", "Tbilisi", "Hobart"]
FOODS = ["peanuts", "shellfish", "sesame", "kiwi", "buckwheat", "mustard", "celery", "lupin"]
INSTRUMENTS = ["cello", "oboe", "banjo", "harp", "trombone", "ukulele", "bassoon", "sitar"]
CARS = ["Volvo", "Subaru", "Peugeot", "Skoda", "Mazda", "Citroen", "Lada", "Saab"]
JOBS = ["radiologist", "locksmith", "cartographer", "sommelier", "glazier", "actuary"]
JA_PETS = ["モチ", "ポチ", "タマ", "クロ", "ハナ", "コタロウ", "ミケ", "ソラ"]
JA_CITIES = ["札幌", "金沢", "那覇", "仙台", "松山", "函館", "長崎", "高知"]
JA_FOODS = ["そば", "えび", "くるみ", "卵", "小麦", "落花生"]
JA_INSTR = ["三味線", "尺八", "琴", "太鼓", "篠笛", "琵琶"]

# (fact, paraphrase question, keyword slot); {p} the person, {x} the rare word
EN_TEMPLATES = [
    ("{p} adopted a kitten named {x} last spring", "does {p} own any animals?", PETS),
    ("{p} relocated to {x} for a new job in March", "which city does {p} live in now?", CITIES),
    ("{p} gets a rash after eating {x}", "what is {p} allergic to?", FOODS),
    ("{p} practises the {x} every evening", "which musical instrument does {p} play?", INSTRUMENTS),
    ("{p} commutes in an old {x} station wagon", "what car does {p} drive?", CARS),
    ("{p} trained for years to become a {x}", "what does {p} do for a living?", JOBS),
]
JA_TEMPLATES = [
    ("{p}さんは去年の春に{x}という子猫を飼い始めた", "{p}さんのペットは？", JA_PETS),
    ("{p}さんは転職して{x}に引っ越した", "{p}さんは今どこに住んでいる？", JA_CITIES),
    ("{p}さんは{x}を食べると発疹が出る", "{p}さんのアレルギーは何？", JA_FOODS),
    ("{p}さんは毎晩{x}の稽古をしている", "{p}さんが演奏する楽器は？", JA_INSTR),
]
FILLER = [
    "ok, let me check that",
    "the tests passed on the second run",
    "I read the file and found nothing unusual",
    "good morning! how was the weekend?",
    "ran `ls -la` in the workspace",
    "the heartbeat found nothing to do",
    "thanks, that helps a lot",
    "了解です、確認します",
    "テストは二回目で通った",
    "おはようございます、週末はどうでしたか",
    "ワークスペースのファイルを読んだ",
    "特にやることはなかった",
]


@dataclass(frozen=True)
class Question:
    text: str
    kind: str  # "paraphrase" or "keyword"
    language: str  # "en" or "ja"
    answer: int  # the index of the answering line in `lines`


def corpus(
    *, people: int = 40, filler: int = 400, seed: int = 35
) -> tuple[list[str], list[Question]]:
    """`lines` (facts and filler, shuffled) and the questions about the facts."""
    rng = random.Random(seed)
    facts: list[tuple[str, str, str, str]] = []  # (line, paraphrase, keyword, language)
    used: set[tuple[str, str]] = set()
    for language, names, templates in (
        ("en", EN_NAMES, EN_TEMPLATES),
        ("ja", JA_NAMES, JA_TEMPLATES),
    ):
        count = people if language == "en" else max(1, people * 2 // 3)
        for n in range(count):
            name = names[n % len(names)] + ("" if n < len(names) else str(n // len(names) + 1))
            for fact, question, words in templates:
                word = rng.choice(words)
                if (name, word) in used:
                    continue
                used.add((name, word))
                facts.append(
                    (
                        fact.format(p=name, x=word),
                        question.format(p=name),
                        f"{name} {word}",
                        language,
                    )
                )
    lines = [f[0] for f in facts] + [rng.choice(FILLER) for _ in range(filler)]
    order = list(range(len(lines)))
    rng.shuffle(order)
    shuffled = [lines[i] for i in order]
    where = {original: position for position, original in enumerate(order)}
    questions: list[Question] = []
    for i, (_, paraphrase, keyword, language) in enumerate(facts):
        questions.append(Question(paraphrase, "paraphrase", language, where[i]))
        questions.append(Question(keyword, "keyword", language, where[i]))
    return shuffled, questions


def write_numbered(memory: Any, session: str, sample: list[str], start: int, stop: int) -> None:
    """Store lines start..stop-1 in `session` (a MemoryManager's speech), each a sample line
    numbered so no two are the same text, 5,000 a transaction."""
    from opencrab.core.memory import SessionLog

    for first in range(start, stop, 5000):
        memory.append_session_logs(
            [
                SessionLog(
                    session_id=session,
                    log_type="speech",
                    content=f"{sample[n % len(sample)]} [{n}]",
                )
                for n in range(first, min(first + 5000, stop))
            ]
        )
