"""MemoryManager on a real migrated SQLite and PostgreSQL database (`any_db`): curated
memory, session logs, search (SQLite: FTS5 trigram; PostgreSQL: pg_trgm) in English,
Japanese and Chinese with hostile query text, impressions, context."""

from __future__ import annotations

from uuid import uuid4

import pytest
import sqlalchemy as sa

from opencrab.config import Settings
from opencrab.core.agent import AgentCreate, AgentStore
from opencrab.core.memory import MAX_CONTEXT_CHARS, MemoryManager, SessionLog
from opencrab.errors import NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.tables import memory_sessions

S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"


@pytest.fixture
def db(any_db: Database) -> Database:
    """Every test here runs on SQLite and on PostgreSQL."""
    return any_db


@pytest.fixture
def store(db: Database, settings: Settings) -> AgentStore:
    return AgentStore(db, settings)


@pytest.fixture
def memory(db: Database, store: AgentStore) -> MemoryManager:
    return MemoryManager(db, store.create(AgentCreate(name="a")).id)


@pytest.fixture
def other(db: Database, store: AgentStore) -> MemoryManager:
    return MemoryManager(db, store.create(AgentCreate(name="b")).id)


def line(content: str, kind: str = "speech", session: str = S1, **extra: object) -> SessionLog:
    return SessionLog(session_id=session, log_type=kind, content=content, **extra)  # type: ignore[arg-type]


def contents(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [h.content for h in hits]


# ------------------------------------------------------------------ curated memory
def test_curated_save_update_delete_by_category(memory: MemoryManager) -> None:
    assert memory.list_curated() == []
    core = memory.save_curated("core", "I keep tidy notes")
    people = memory.save_curated("people", "Yui prefers short answers")
    memory.save_curated("  core  ", "I value evidence")  # the category is trimmed
    assert [(m.category, m.content) for m in memory.list_curated()] == [
        ("core", "I keep tidy notes"),
        ("core", "I value evidence"),
        ("people", "Yui prefers short answers"),
    ]
    assert [m.id for m in memory.list_curated("people")] == [people.id]
    assert memory.list_curated("missing") == []

    updated = memory.save_curated("people", "I keep very tidy notes", id=core.id)
    assert updated.id == core.id
    assert updated.updated_at >= core.updated_at
    assert [m.content for m in memory.list_curated("core")] == ["I value evidence"]
    assert {m.content for m in memory.list_curated("people")} == {
        "Yui prefers short answers",
        "I keep very tidy notes",
    }

    memory.delete_curated(people.id)
    assert people.id not in {m.id for m in memory.list_curated()}
    with pytest.raises(NotFoundError):
        memory.delete_curated(people.id)  # already gone
    with pytest.raises(NotFoundError, match="no memory"):
        memory.save_curated("core", "x", id=str(uuid4()))


def test_curated_memory_of_another_agent_is_unreachable(
    memory: MemoryManager, other: MemoryManager
) -> None:
    mine = memory.save_curated("core", "mine")
    with pytest.raises(NotFoundError):
        other.save_curated("core", "hijacked", id=mine.id)
    with pytest.raises(NotFoundError):
        other.delete_curated(mine.id)
    assert other.list_curated() == []
    assert [m.content for m in memory.list_curated()] == ["mine"]


@pytest.mark.parametrize(
    ("category", "content", "message"),
    [
        ("", "x", "category must be 1 to 64"),
        ("   ", "x", "category must be 1 to 64"),
        ("c" * 65, "x", "category must be 1 to 64"),
        ("core", "", "content is empty"),
        ("core", " \n\t", "content is empty"),
    ],
)
def test_curated_memory_validation(
    memory: MemoryManager, category: str, content: str, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        memory.save_curated(category, content)
    assert memory.list_curated() == []


def test_category_of_64_characters_is_allowed(memory: MemoryManager) -> None:
    assert memory.save_curated("c" * 64, "x").category == "c" * 64


# ------------------------------------------------------------------ session logs
def test_logs_round_trip_every_field(memory: MemoryManager) -> None:
    event = str(uuid4())
    memory.append_session_log(
        line(
            "東京の話",
            kind="action",
            speaker_id="user-1",
            turn_number=7,
            metadata={"tool": "ws_write", "日本": [1, 2]},
            event_id=event,
        )
    )
    (stored,) = memory.session_logs(S1)
    assert (stored.content, stored.log_type, stored.speaker_id, stored.turn_number) == (
        "東京の話",
        "action",
        "user-1",
        7,
    )
    assert stored.metadata == {"tool": "ws_write", "日本": [1, 2]}
    assert stored.event_id == event
    assert stored.session_id == S1
    assert stored.created_at.tzinfo is not None


def test_session_logs_are_oldest_first_and_limited_to_the_latest(memory: MemoryManager) -> None:
    memory.append_session_logs([line(f"s1 line {n}") for n in range(6)])
    memory.append_session_logs([line(f"s2 line {n}", session=S2) for n in range(3)])
    memory.append_session_logs([])  # nothing to do, no error
    assert contents(memory.session_logs(S1)) == [f"s1 line {n}" for n in range(6)]
    assert contents(memory.session_logs(S1, limit=2)) == ["s1 line 4", "s1 line 5"]
    assert contents(memory.session_logs(S2, limit=100)) == ["s2 line 0", "s2 line 1", "s2 line 2"]
    assert contents(memory.session_logs(S1, limit=0)) == ["s1 line 5"]  # at least one
    assert contents(memory.recent_logs(limit=4)) == [
        "s1 line 5",
        "s2 line 0",
        "s2 line 1",
        "s2 line 2",
    ]
    ids = [log.id for log in memory.recent_logs()]
    assert ids == sorted(ids)
    assert len(ids) == 9


def test_session_logs_filter_by_type(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line("said", "speech"),
            line("thought", "inner_voice"),
            line("did", "action"),
            line("noted", "system"),
        ]
    )
    assert contents(memory.session_logs(S1, log_types=["inner_voice", "system"])) == [
        "thought",
        "noted",
    ]
    assert memory.session_logs(S1, log_types=[]) == []


def test_session_summaries(memory: MemoryManager) -> None:
    assert memory.sessions() == []
    memory.append_session_logs([line("a"), line("b")])
    memory.append_session_logs([line("c", session=S2)])
    memory.append_session_logs([line("d")])  # S1 is the most recently active again
    summaries = memory.sessions()
    assert [(s.session_id, s.entries) for s in summaries] == [(S1, 3), (S2, 1)]
    first = summaries[0]
    assert first.first_at <= first.last_at
    assert first.first_at.tzinfo is not None


def test_logs_written_in_a_rolled_back_transaction_are_not_kept_or_indexed(
    db: Database, memory: MemoryManager
) -> None:
    def failing_step() -> None:
        with db.write() as conn:
            memory.append_session_logs([line("rolled back weather")], conn=conn)
            raise RuntimeError("abort the step")

    with pytest.raises(RuntimeError):
        failing_step()
    assert memory.recent_logs() == []
    assert memory.search("weather") == []
    with db.write() as conn:
        memory.append_session_log(line("committed weather"), conn=conn)
    assert contents(memory.search("weather")) == ["committed weather"]


# ------------------------------------------------------------------ search
def test_english_search_ranks_more_matches_higher(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line("the weather was mentioned once, then we talked about lunch"),
            line("weather weather weather: the weather report"),
            line("nothing relevant here"),
        ]
    )
    hits = memory.search("weather")
    assert contents(hits) == [
        "weather weather weather: the weather report",
        "the weather was mentioned once, then we talked about lunch",
    ]
    assert hits[0].score > hits[1].score > 0  # higher is better
    assert memory.search("WEATHER")[0].content == hits[0].content  # case-insensitive


def test_search_is_case_insensitive_for_long_and_short_words(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [line("Osaka Weather Report"), line("OK, Go ahead"), line("nothing here")]
    )
    for query in ("weather", "WEATHER", "wEaThEr", "osaka weather", "OSAKA REPORT"):
        hits = memory.search(query)
        assert contents(hits) == ["Osaka Weather Report"], query
        assert hits[0].score > 0, query
    for query in ("ok", "OK", "go", "gO", "ok GO"):  # short words: the LIKE/ILIKE path
        assert contents(memory.search(query)) == ["OK, Go ahead"], query
    assert contents(memory.search("weather re")) == ["Osaka Weather Report"]  # long + short


def test_ranking_prefers_more_occurrences_then_shorter_lines_then_newer(
    memory: MemoryManager,
) -> None:
    memory.append_session_logs(
        [
            line("rain"),  # no match: keeps the idf of "sunny" positive
            line("sunny " + "filler words " * 10),
            line("sunny sunny and more"),
            line("sunny day"),
            line("sunny day"),  # the same line again, written later
            line("cloudy"),
            line("foggy"),
            line("windy"),
        ]
    )
    hits = memory.search("sunny")
    assert contents(hits) == [
        "sunny sunny and more",
        "sunny day",
        "sunny day",
        "sunny " + "filler words " * 10,
    ]
    assert hits[1].id > hits[2].id  # equal scores: the newer line first
    assert hits[0].score > hits[1].score == hits[2].score > hits[3].score > 0


def test_ranking_weighs_a_rare_word_above_a_common_one(memory: MemoryManager) -> None:
    """bm25's idf: the line with more of the rare word wins, though it is longer."""
    memory.append_session_logs(
        [
            *(line(f"common filler {n}") for n in range(10)),
            line("common common common rare"),
            line("common rare rare rare and some padding"),
        ]
    )
    assert contents(memory.search("common rare")) == [
        "common rare rare rare and some padding",
        "common common common rare",
    ]


def test_short_japanese_and_chinese_words_are_found_newest_first(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line("明日は雨が降る"),
            line("今天下雨了"),
            line("雨の日も好き"),
            line("晴れの日"),
        ]
    )
    assert contents(memory.search("雨")) == ["雨の日も好き", "今天下雨了", "明日は雨が降る"]
    assert contents(memory.search("下雨")) == ["今天下雨了"]
    assert contents(memory.search("の日")) == ["晴れの日", "雨の日も好き"]
    assert contents(memory.search("雨 の日")) == ["雨の日も好き"]
    assert contents(memory.search("好き 雨の日")) == ["雨の日も好き"]  # short + ranked


def test_hostile_query_text_is_searched_literally(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line('say a" OR "b now'),
            line("a or b"),
            line("NEAR(x y) here"),
            line("near x y"),
            line("star * alone"),
            line("50% off"),
            line("file_name"),
            line("back\\slash"),
            line("quote ' single"),
            line("plain words"),
        ]
    )
    assert contents(memory.search('a" OR "b')) == ['say a" OR "b now']
    assert contents(memory.search("NEAR(")) == ["NEAR(x y) here"]
    assert contents(memory.search("near(")) == ["NEAR(x y) here"]  # case-insensitive too
    assert contents(memory.search("*")) == ["star * alone"]
    assert contents(memory.search("%")) == ["50% off"]
    assert contents(memory.search("0%")) == ["50% off"]
    assert contents(memory.search("50% off")) == ["50% off"]
    assert contents(memory.search("_")) == ["file_name"]
    assert contents(memory.search("e_n")) == ["file_name"]
    assert memory.search("e_x") == memory.search("file_names") == []
    assert contents(memory.search("\\")) == ["back\\slash"]
    assert contents(memory.search("k\\s")) == ["back\\slash"]
    assert contents(memory.search("'")) == ["quote ' single"]
    assert contents(memory.search("' single")) == ["quote ' single"]
    assert memory.search("%%%") == memory.search("___") == memory.search("a%b") == []


def test_search_needs_every_word(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [line("the weather in Tokyo is sunny"), line("the weather in Osaka is rainy")]
    )
    assert contents(memory.search("weather sunny")) == ["the weather in Tokyo is sunny"]
    assert contents(memory.search("sunny rainy")) == []
    assert len(memory.search("weather weather")) == 2  # repeated words count once


def test_japanese_search_with_three_or_more_characters(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line("東京の天気は晴れです"),
            line("大阪の天気は雨です"),
            line("東京タワーに行った"),
        ]
    )
    hits = memory.search("東京の天気")
    assert contents(hits) == ["東京の天気は晴れです"]
    assert hits[0].score > 0
    assert set(contents(memory.search("の天気は"))) == {
        "東京の天気は晴れです",
        "大阪の天気は雨です",
    }


def test_japanese_two_character_word_falls_back_to_like(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line("東京の天気は晴れです"),
            line("大阪は雨でした"),
            line("東京タワーに行った"),
        ]
    )
    hits = memory.search("東京")
    assert contents(hits) == ["東京タワーに行った", "東京の天気は晴れです"]  # newest first
    assert all(h.score == 0.0 for h in hits)
    assert contents(memory.search("雨")) == ["大阪は雨でした"]  # one character works too
    # a long word (FTS) and a short one (LIKE) together
    assert contents(memory.search("東京の天気 晴れ")) == ["東京の天気は晴れです"]
    assert memory.search("東京の天気 雨") == []


def test_chinese_search(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [line("今天北京天气很好"), line("上海明天下雨"), line("北京烤鸭很好吃")]
    )
    assert contents(memory.search("北京天气")) == ["今天北京天气很好"]
    assert set(contents(memory.search("北京"))) == {"今天北京天气很好", "北京烤鸭很好吃"}
    assert contents(memory.search("下雨")) == ["上海明天下雨"]


INJECTIONS = [
    'foo" OR "bar',
    "foo OR bar",
    "NEAR(a b)",
    "NEAR(weather sunny)",
    "a*",
    "weath*",
    "col:x",
    "content:weather",
    "(",
    ")",
    '"',
    '""""',
    "AND",
    "NOT weather",
    "-weather",
    "^weather",
    "{content}: weather",
    "%",
    "_",
    "\\",
    "a%",
    "%%%",
]


def test_fts_operators_in_queries_are_literal_text(memory: MemoryManager) -> None:
    """One database for every query: migrating one per query would cost seconds."""
    memory.append_session_logs(
        [
            line("the weather is sunny"),
            line("foo and bar but not together"),
            line('literal foo" OR "bar here'),
            line("NEAR(a b) literal"),
            line("a* literal star"),
            line("col:x literal"),
            line("( open paren"),
            line('one " quote'),
            line("100% sure"),
            line("snake_case"),
        ]
    )
    for query in INJECTIONS:
        hits = memory.search(query)  # never raises
        for hit in hits:
            for word in query.split():
                assert word.lower() in hit.content.lower(), (query, hit.content)


def test_injections_find_the_literal_lines(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line("foo alone"),
            line("bar alone"),
            line('literal foo" OR "bar here'),
            line("NEAR(a b) literal"),
            line("a* literal star"),
            line("abc plain"),
            line("col:x literal"),
            line("100% sure"),
            line("snake_case"),
            line("plain text"),
        ]
    )
    assert contents(memory.search('foo" OR "bar')) == ['literal foo" OR "bar here']
    assert contents(memory.search("NEAR(a b)")) == ["NEAR(a b) literal"]
    assert contents(memory.search("a*")) == ["a* literal star"]  # not a prefix query
    assert contents(memory.search("col:x")) == ["col:x literal"]
    assert contents(memory.search("%")) == ["100% sure"]  # not a LIKE wildcard
    assert contents(memory.search("_")) == ["snake_case"]
    assert memory.search("NOT foo") == []  # "NOT" is a word to find, not an operator


def test_unindexed_columns_are_not_searched(memory: MemoryManager) -> None:
    memory.append_session_logs([line("something else entirely", kind="speech")])
    assert memory.search("speech") == []
    assert memory.search(memory.agent_id) == []
    assert memory.search(S1) == []


def test_empty_or_invalid_queries_are_refused(memory: MemoryManager) -> None:
    for query in ("", "   ", "\n\t", "\x00\x01"):
        with pytest.raises(ValidationError, match="search query is empty"):
            memory.search(query)
    with pytest.raises(ValidationError, match="must be a string"):
        memory.search(None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown log types"):
        memory.search("weather", log_types=["gossip"])


def test_search_filters_by_session_and_type(memory: MemoryManager) -> None:
    memory.append_session_logs(
        [
            line("weather said in one", "speech", S1),
            line("weather thought in one", "inner_voice", S1),
            line("weather said in two", "speech", S2),
            line("天気 in two", "system", S2),
        ]
    )
    assert set(contents(memory.search("weather", session_id=S2))) == {"weather said in two"}
    assert contents(memory.search("weather", log_types=["inner_voice"])) == [
        "weather thought in one"
    ]
    assert contents(memory.search("weather", session_id=S1, log_types=["speech"])) == [
        "weather said in one"
    ]
    assert set(contents(memory.search("weather", log_types=["speech", "inner_voice"]))) == {
        "weather said in one",
        "weather thought in one",
        "weather said in two",
    }
    # the LIKE path filters the same way
    assert contents(memory.search("天気", session_id=S2, log_types=["system"])) == ["天気 in two"]
    assert memory.search("天気", session_id=S1) == []
    assert memory.search("天気", log_types=["speech"]) == []


def test_search_limit_is_clamped(memory: MemoryManager) -> None:
    memory.append_session_logs([line(f"weather {n}") for n in range(120)])
    assert len(memory.search("weather", limit=3)) == 3
    assert len(memory.search("weather", limit=0)) == 1
    assert len(memory.search("weather", limit=1000)) == 100
    assert len(memory.search("we", limit=1000)) == 100  # the LIKE path too


def test_other_agents_logs_are_never_returned(memory: MemoryManager, other: MemoryManager) -> None:
    other.append_session_logs(
        [line("private weather notes"), line("東京の秘密"), line("secret 東京の天気")]
    )
    memory.append_session_log(line("my own weather notes", session=S2))
    assert contents(memory.search("weather")) == ["my own weather notes"]
    assert memory.search("東京") == []
    assert memory.search("東京の天気") == []
    assert memory.session_logs(S1) == []
    assert contents(memory.recent_logs()) == ["my own weather notes"]
    assert [s.session_id for s in memory.sessions()] == [S2]
    assert len(other.search("weather")) == 1


def test_log_batches_read_a_whole_session_in_order_and_stop_at_the_start(
    memory: MemoryManager, other: MemoryManager
) -> None:
    memory.append_session_logs([line(f"line {n}") for n in range(7)])
    memory.append_session_logs([line("elsewhere", session=S2)])
    other.append_session_logs([line("not mine")])
    batches = memory.log_batches(S1, batch=3)
    first = next(batches)
    memory.append_session_logs([line("written during the read")])
    rest = list(batches)
    assert [len(b) for b in [first, *rest]] == [3, 3, 1]
    assert [log.content for b in [first, *rest] for log in b] == [f"line {n}" for n in range(7)]
    assert list(memory.log_batches(S2, batch=3)) == [memory.session_logs(S2)]
    assert list(memory.log_batches(str(uuid4()))) == []


def test_sessions_can_be_limited_to_the_latest(memory: MemoryManager) -> None:
    memory.append_session_logs([line("one", session=S1), line("two", session=S2)])
    assert [s.session_id for s in memory.sessions(limit=1)] == [S2]
    assert [s.session_id for s in memory.sessions()] == [S2, S1]


# ------------------------------------------------------------------ impressions
def test_update_impression_upserts_and_keeps_untouched_fields(memory: MemoryManager) -> None:
    first = memory.update_impression(
        S1, "u1", "Yui", personality="calm", communication_style="brief", turn=2
    )
    assert (first.personality, first.communication_style, first.agreement) == (
        "calm",
        "brief",
        "中立",
    )
    assert (first.recent_behavior, first.notes, first.last_updated_turn) == ("", "", 2)

    second = memory.update_impression(S1, "u1", "Yui-san", agreement="賛成", notes="likes data")
    assert second.target_name == "Yui-san"
    assert (second.personality, second.communication_style) == ("calm", "brief")
    assert (second.agreement, second.notes) == ("賛成", "likes data")
    assert second.last_updated_turn == 2  # no turn given: kept

    third = memory.update_impression(S1, "u1", "Yui-san", personality="", turn=5)
    assert third.personality == ""  # "" is a change; only None means "keep"
    assert third.notes == "likes data"
    assert third.last_updated_turn == 5

    assert len(memory.impressions(S1)) == 1
    assert memory.impressions(S2) == []
    memory.update_impression(S2, "u1", "Yui", personality="different session")
    assert memory.impressions(S1)[0].personality == ""


def test_impressions_are_ordered_by_name_and_validated(memory: MemoryManager) -> None:
    memory.update_impression(S1, "u2", "Ren")
    memory.update_impression(S1, "u1", "Aoi")
    assert [i.target_name for i in memory.impressions(S1)] == ["Aoi", "Ren"]
    with pytest.raises(ValidationError):
        memory.update_impression(S1, "", "Nobody")
    with pytest.raises(ValidationError):
        memory.update_impression(S1, "u3", "  ")


def test_impressions_belong_to_one_agent(memory: MemoryManager, other: MemoryManager) -> None:
    memory.update_impression(S1, "u1", "Yui", personality="calm")
    other.update_impression(S1, "u1", "Yui", personality="loud")
    assert memory.impressions(S1)[0].personality == "calm"
    assert other.impressions(S1)[0].personality == "loud"


def test_all_impressions_span_sessions_by_name_newest_first(
    memory: MemoryManager, other: MemoryManager
) -> None:
    memory.update_impression(S1, "u1", "Yui", personality="calm")
    memory.update_impression(S1, "u2", "Ren", notes="早口")
    memory.update_impression(S2, "u1", "Yui", personality="tired")
    other.update_impression(S1, "u1", "Yui", personality="someone else's view")
    seen = memory.all_impressions()
    assert [(i.target_name, i.session_id, i.personality) for i in seen] == [
        ("Ren", S1, ""),
        ("Yui", S2, "tired"),
        ("Yui", S1, "calm"),
    ]
    assert [i.notes for i in seen if i.target_id == "u2"] == ["早口"]


# ------------------------------------------------------------------ context
def test_build_context_is_empty_without_memories(memory: MemoryManager) -> None:
    assert memory.build_context("ja") == ""
    assert memory.build_context("ja", session_id=S1) == ""
    memory.save_curated("people", "not a core memory")
    assert memory.build_context("ja", session_id=S1) == ""  # only "core" goes in the prompt


def test_build_context_has_core_memory_and_impressions(memory: MemoryManager) -> None:
    memory.save_curated("core", "  I value evidence  ")
    memory.save_curated("core", "I answer in Japanese")
    memory.save_curated("people", "left out")
    memory.update_impression(S1, "u1", "Yui", personality="calm", agreement="賛成", notes="PM")
    memory.update_impression(S1, "u2", "Ren", recent_behavior="quiet today")
    assert memory.build_context("ja", session_id=S1) == (
        "【MEMORY】\n"
        "- I value evidence\n"
        "- I answer in Japanese\n"
        "他者への印象:\n"
        "- Ren: quiet today / 同意度: 中立\n"
        "- Yui: calm / 同意度: 賛成 / PM"
    )
    assert memory.build_context("ja") == "【MEMORY】\n- I value evidence\n- I answer in Japanese"
    assert memory.build_context("ja", session_id=S2) == memory.build_context("ja")


def test_build_context_with_only_impressions(memory: MemoryManager) -> None:
    memory.update_impression(S1, "u1", "Yui", personality="calm")
    assert memory.build_context("ja", session_id=S1) == (
        "【MEMORY】\n他者への印象:\n- Yui: calm / 同意度: 中立"
    )


def test_build_context_is_capped(memory: MemoryManager) -> None:
    for n in range(10):
        memory.save_curated("core", f"{n} " + "x" * 600)
    context = memory.build_context("ja")
    assert len(context) == MAX_CONTEXT_CHARS
    assert context.startswith("【MEMORY】\n- 0 xxx")
    assert context.endswith("…")


def test_deleting_the_agent_removes_its_logs(
    db: Database, store: AgentStore, memory: MemoryManager
) -> None:
    memory.append_session_logs([line("weather one"), line("weather two")])
    store.delete(memory.agent_id)
    with db.read() as conn:
        left = conn.execute(
            sa.select(sa.func.count())
            .select_from(memory_sessions)
            .where(memory_sessions.c.agent_id == memory.agent_id)
        ).scalar()
    assert left == 0
    assert memory.search("weather") == []
