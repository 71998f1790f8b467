"""Tests for memory_runtime.protocol: the memory-call text format everything else relies on."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_runtime.protocol import (
    EMPTY_RESULT,
    READ_OPEN,
    READ_QUERY_CLOSE,
    WRITE_CLOSE,
    WRITE_OPEN,
    Call,
    ParseError,
    ReadResults,
    StreamParser,
    Triplet,
    escape_term,
    parse_calls,
    render_read,
    render_results,
    render_write,
    strip_calls,
)

PFIZER = "[MEM_READ{>>employed by>>Pfizer}: {Dorothea Altemus>>employed by>>Pfizer}; {Tia Batres>>employed by>>Pfizer}]"


def only(text: str):
    events = parse_calls(text)
    assert len(events) == 1, events
    return events[0]


def error(text: str) -> ParseError:
    event = only(text)
    assert isinstance(event, ParseError), event
    return event


# ----------------------------------------------------------------------------- rendering


def test_constants_spell_the_format():
    assert (WRITE_OPEN, READ_OPEN, WRITE_CLOSE, READ_QUERY_CLOSE) == ("[MEM_WRITE{", "[MEM_READ{", "}]", "}:")
    assert EMPTY_RESULT == "NONE"


def test_render_examples():
    assert render_write("A", "employed by", "B") == "[MEM_WRITE{A>>employed by>>B}]"
    assert render_read(None, "employed by", "Pfizer") == "[MEM_READ{>>employed by>>Pfizer}:"
    assert render_read("A") == "[MEM_READ{A>>>>}:"
    assert render_read("A", "b", "C") == "[MEM_READ{A>>b>>C}:"
    results = [Triplet("Dorothea Altemus", "employed by", "Pfizer"), ("Tia Batres", "employed by", "Pfizer")]
    assert render_read(None, "employed by", "Pfizer") + render_results(results) == PFIZER
    assert render_results([]) == " NONE]"


def test_render_results_accepts_objects_with_attributes():
    class Fact:
        subject, relation, object = "A", "likes", "B"

    assert render_results([Fact()]) == " {A>>likes>>B}]"


def test_escape_term():
    assert escape_term("plain term") == "plain term"
    assert escape_term("a>>b") == "a\\>\\>b"
    assert escape_term("{x}[y];\\") == "\\{x\\}\\[y\\]\\;\\\\"
    assert escape_term(" x y\n") == "\\ x y\\\n"
    assert escape_term("   ") == "\\ \\ \\ "


@pytest.mark.parametrize(
    "args",
    [("", "b", "c"), ("a", "", "c"), ("a", "b", ""), (None, "b", "c"), ("a", 3, "c"), ("a", "b", b"c")],
)
def test_render_write_rejects_empty_or_non_str(args):
    with pytest.raises(ValueError):
        render_write(*args)


@pytest.mark.parametrize("args", [(), (None, None, None), ("", None, None), (None, "", "x"), (None, 5, None)])
def test_render_read_rejects_bad_queries(args):
    with pytest.raises(ValueError):
        render_read(*args)


@pytest.mark.parametrize(
    "items", [[("a", "b")], [("a", "b", "c", "d")], ["abc"], [("a", "", "c")], [5], [(1, "b", "c")]]
)
def test_render_results_rejects_bad_triplets(items):
    with pytest.raises(ValueError):
        render_results(items)


# ----------------------------------------------------------------------------- parsing good calls


def test_parse_write_strips_unescaped_whitespace():
    text = "[MEM_WRITE{ A >> b >> C }]"
    assert parse_calls(text) == [Call("write", ("A", "b", "C"), 0, len(text))]


def test_parse_several_writes_in_a_row():
    text = "Noted. [MEM_WRITE{A>>employed by>>B}][MEM_WRITE{C>>employed by>>B}]\n[MEM_WRITE{D>>lives in>>E}] ok"
    events = parse_calls(text)
    assert [e.fields for e in events] == [("A", "employed by", "B"), ("C", "employed by", "B"), ("D", "lives in", "E")]
    assert all(isinstance(e, Call) and e.kind == "write" for e in events)
    assert [text[e.start : e.end] for e in events] == [
        "[MEM_WRITE{A>>employed by>>B}]",
        "[MEM_WRITE{C>>employed by>>B}]",
        "[MEM_WRITE{D>>lives in>>E}]",
    ]


@pytest.mark.parametrize(
    "query, fields",
    [
        ("[MEM_READ{A>>>>}:", ("A", None, None)),
        ("[MEM_READ{>>employed by>>}:", (None, "employed by", None)),
        ("[MEM_READ{ >> >>Pfizer }:", (None, None, "Pfizer")),
        ("[MEM_READ{A>>employed by>>}:", ("A", "employed by", None)),
        ("[MEM_READ{>>employed by>>Pfizer}:", (None, "employed by", "Pfizer")),
        ("[MEM_READ{A>>employed by>>Pfizer}:", ("A", "employed by", "Pfizer")),
    ],
)
def test_parse_read_shapes(query, fields):
    assert parse_calls(query) == [Call("read", fields, 0, len(query))]


def test_parse_read_with_results():
    call = only(PFIZER)
    assert call == Call(
        "read",
        (None, "employed by", "Pfizer"),
        0,
        PFIZER.index("}:") + 2,
        results=(Triplet("Dorothea Altemus", "employed by", "Pfizer"), Triplet("Tia Batres", "employed by", "Pfizer")),
        results_end=len(PFIZER),
    )


def test_parse_read_with_none_result():
    text = "[MEM_READ{A>>employed by>>}: NONE] so I don't know."
    call = only(text)
    assert call.results == () and text[call.results_end :] == " so I don't know."


def test_results_tolerate_whitespace_between_items():
    call = only("[MEM_READ{A>>b>>}:\n  {A >> b >> C} ;\n{A>>b>>D}  ]")
    assert call.results == (Triplet("A", "b", "C"), Triplet("A", "b", "D"))


@pytest.mark.parametrize("tail", [" I don't know", " Nobody", " NONE of them", " N ONE]", " NO", ": {", ""])
def test_read_without_results_continues_as_text(tail):
    text = "[MEM_READ{A>>b>>}:" + tail
    call = only(text)
    assert call.results is None and call.results_end is None and call.end == 18


def test_escapes_and_separators_inside_fields():
    assert only("[MEM_WRITE{a>>>b>>c}]").fields == ("a", ">b", "c")
    assert only("[MEM_WRITE{a>b>>c>>d}]").fields == ("a>b", "c", "d")
    assert only("[MEM_WRITE{a\\>>>b>>c\\}\\]}]").fields == ("a>", "b", "c}]")
    assert only("[MEM_WRITE{\\ a\\ >>\\q>>\\\\}]").fields == (" a ", "q", "\\")


def test_ordinary_brackets_are_text():
    text = "See [1] and [MEMO] or [MEM_WRITE] and [MEM_ {x}] and [mem_write{a>>b>>c}] [MEM_V2{a}] [MEMO{a>>b>>c}] {a>>b>>c}."
    assert parse_calls(text) == []
    assert strip_calls(text) == text


# ----------------------------------------------------------------------------- malformed calls


@pytest.mark.parametrize(
    "text, message",
    [
        ("[MEM_WRITE{a>>b>>c>>d}]", "write call has 4 fields, expected 3"),
        ("[MEM_WRITE{a>>b}]", "write call has 2 fields, expected 3"),
        ("[MEM_READ{a>>b}:", "read query has 2 fields, expected 3"),
        ("[MEM_WRITE{ >>b>>c}]", "empty subject in write call"),
        ("[MEM_WRITE{a>>  >>c}]", "empty relation in write call"),
        ("[MEM_WRITE{a>>b>>}]", "empty object in write call"),
        ("[MEM_DELETE{a>>b>>c}]", "unknown verb 'MEM_DELETE'"),
        ("[MEM_WRITE{a>>b>>c}:", "write call must end with '}]'"),
        ("[MEM_READ{a>>b>>}]", "read query must end with '}:'"),
        ("[MEM_READ{ >> >> }:", "read query has no filled field"),
        ("[MEM_WRITE{a>>b>>c", "unterminated call"),
        ("[MEM_WRITE{a>>b>>c}", "unterminated call"),
    ],
)
def test_malformed_call_messages(text, message):
    err = error(text)
    assert err.message == message
    assert (err.start, err.end, err.text) == (0, len(text), text)


@pytest.mark.parametrize(
    "bad, message",
    [
        ("[MEM_WRITE{a{>>b>>c}]", "unbalanced '{'"),
        ("[MEM_WRITE{a}>>b>>c}]", "unbalanced '}'"),
        ("[MEM_WRITE{a>>b>>c}}", "unbalanced '}'"),
        ("[MEM_WRITE{a>>b]>>c}]", "unexpected ']'"),
    ],
)
def test_unbalanced_braces_resume_after_offending_char(bad, message):
    events = parse_calls(bad + " [MEM_WRITE{x>>y>>z}]")
    assert isinstance(events[0], ParseError) and message in events[0].message
    assert events[0].start == 0 and events[0].text == bad[: events[0].end]
    assert events[-1].fields == ("x", "y", "z")


def test_good_call_after_unterminated_one_is_found():
    text = "[MEM_WRITE{a>>b [MEM_WRITE{x>>y>>z}] and [MEM_READ{q>>[MEM_READ{q>>r>>}: NONE]"
    events = parse_calls(text)
    assert [type(e) for e in events] == [ParseError, Call, ParseError, Call]
    assert events[0] == ParseError("unterminated call", 0, 16, "[MEM_WRITE{a>>b ")
    assert events[1].fields == ("x", "y", "z") and events[1].start == 16
    assert events[3].fields == ("q", "r", None) and events[3].results == ()


def test_call_cut_short_right_after_close_brace_restarts_at_bracket():
    events = parse_calls("[MEM_WRITE{a>>b>>c}[MEM_WRITE{x>>y>>z}]")
    assert events[0] == ParseError("unbalanced '}' inside call", 0, 19, "[MEM_WRITE{a>>b>>c}")
    assert events[1] == Call("write", ("x", "y", "z"), 19, 39)


def test_malformed_results():
    bad_results = [" {x>>y}]", " {x>>>>z}]", " {a>>b>>c} {d>>e>>f}]", " {a>>b>>c};]", " {a{>>b>>c}]", " {a>>b>>c}"]
    for bad in bad_results:
        text = "[MEM_READ{a>>b>>}:" + bad
        call, err = parse_calls(text)
        assert call.kind == "read" and call.results is None
        assert isinstance(err, ParseError) and err.start == call.end == 18, bad


def test_result_triplet_field_errors_cover_the_whole_results():
    text = "[MEM_READ{a>>b>>}: {a>>b>>c}; {x>>>>z}; {d>>e>>f}] after"
    _, err = parse_calls(text)
    assert err.message == "empty relation in result triplet"
    assert text[err.end :] == " after"
    assert strip_calls(text) == "after"


# ----------------------------------------------------------------------------- strip_calls


def test_strip_calls_writes():
    text = "I'll remember. [MEM_WRITE{A>>employed by>>B}] [MEM_WRITE{C>>employed by>>B}] Done."
    assert strip_calls(text) == "I'll remember. Done."


def test_strip_calls_read_transcript():
    assert strip_calls("Let me check. " + PFIZER + " Dorothea and Tia work there.") == (
        "Let me check. Dorothea and Tia work there."
    )
    assert strip_calls("[MEM_READ{A>>b>>}: NONE] I don't know.") == "I don't know."
    assert strip_calls("[MEM_READ{A>>b>>}: I don't know.") == "I don't know."


def test_strip_calls_removes_malformed_spans():
    assert strip_calls("Hi [MEM_DELETE{a>>b>>c}] there") == "Hi there"
    assert strip_calls("Hi [MEM_WRITE{a>>b there") == "Hi"
    assert strip_calls("Hi [MEM_WRITE{a>>b [MEM_WRITE{x>>y>>z}] there") == "Hi there"


# ----------------------------------------------------------------------------- streaming


def feed_in_chunks(text: str, cuts) -> list:
    parser, events, prev = StreamParser(), [], 0
    for cut in sorted(set(cuts)) + [len(text)]:
        events += parser.feed(text[prev:cut])
        prev = cut
    assert parser.position == len(text)
    return events + parser.close()


def test_calls_are_emitted_exactly_when_they_close():
    text = "x [MEM_WRITE{a>>b>>c}] " + PFIZER + " y"
    parser, seen = StreamParser(), []
    for i, ch in enumerate(text):
        for event in parser.feed(ch):
            seen.append((i + 1, event))
    write, read, results = (e for _, e in seen)
    assert [pos for pos, _ in seen] == [write.end, read.end, results.end]
    assert text[write.end - 2 : write.end] == "}]" and text[read.end - 2 : read.end] == "}:"
    assert read.results is None and isinstance(results, ReadResults) and results.start == read.end
    assert text[results.start : results.end] == render_results(results.triplets)


def test_none_lookahead_does_not_depend_on_chunking():
    for tail in ("ONE] ok", "obody knows", "ONE"):
        parser = StreamParser()
        first = parser.feed("[MEM_READ{a>>b>>}: N")
        events = first + parser.feed(tail) + parser.close()
        assert events == feed_in_chunks("[MEM_READ{a>>b>>}: N" + tail, [])
        assert (len(events) == 2) == tail.startswith("ONE]")


def test_stream_offsets_are_absolute():
    parser = StreamParser()
    assert parser.feed("hello " * 3) == []
    (call,) = parser.feed("[MEM_WRITE{a>>b>>c}]")
    assert (call.start, call.end, parser.position) == (18, 38, 38)
    assert parser.feed("[MEM_WRITE{a>>") == [] and parser.close() == [
        ParseError("unterminated call", 38, 52, "[MEM_WRITE{a>>")
    ]


# ----------------------------------------------------------------------------- properties

terms = st.text(min_size=1)
maybe_terms = st.one_of(st.none(), terms)
triplets = st.builds(Triplet, terms, terms, terms)
PROPS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(terms, terms, terms)
def test_write_round_trip(s, r, o):
    text = render_write(s, r, o)
    assert parse_calls(text) == [Call("write", (s, r, o), 0, len(text))]
    assert strip_calls("a " + text + " b") == "a b"


@PROPS
@given(maybe_terms, maybe_terms, maybe_terms, st.one_of(st.none(), st.lists(triplets, max_size=4)))
def test_read_and_results_round_trip(q1, q2, q3, results):
    if q1 is q2 is q3 is None:
        q1 = "x"
    query = render_read(q1, q2, q3)
    tail = "" if results is None else render_results(results)
    text = "ok " + query + tail + " done"
    (call,) = parse_calls(text)
    assert call.kind == "read" and call.fields == (q1, q2, q3)
    assert (call.start, call.end) == (3, 3 + len(query))
    if results is None:
        assert call.results is None and call.results_end is None
    else:
        assert call.results == tuple(results) and call.results_end == call.end + len(tail)
    assert strip_calls(text) == "ok done"


fragments = st.sampled_from(
    [
        "[",
        "]",
        "{",
        "}",
        "}]",
        "}:",
        ">>",
        ">",
        "\\",
        ";",
        " ",
        "\n",
        "NONE]",
        "NO",
        "N",
        ":",
        "[MEM_",
        "[MEM_WRITE{",
        "[MEM_READ{",
        "[MEM_DELETE{",
        "[1]",
        " {a>>b>>c}",
        "; ",
        "é",
        "😀",
    ]
)
pieces = st.one_of(
    fragments,
    st.builds(render_write, terms, terms, terms),
    st.builds(lambda q, r: render_read(q, r), terms, maybe_terms),
    st.builds(render_results, st.lists(triplets, max_size=3)),
    st.text(max_size=8),
)
messy_text = st.lists(pieces, max_size=12).map("".join)


@PROPS
@given(messy_text, st.data())
def test_stream_parser_is_chunking_independent(text, data):
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    assert feed_in_chunks(text, cuts) == feed_in_chunks(text, [])
    assert feed_in_chunks(text, range(len(text))) == feed_in_chunks(text, [])


biased_text = st.text(alphabet=st.one_of(st.sampled_from("[]{}>:;\\ NME_ORWITDA"), st.characters()), max_size=60)


@PROPS
@given(st.one_of(biased_text, messy_text))
def test_parse_calls_never_raises_and_spans_are_consistent(text):
    events = parse_calls(text)
    cursor = 0
    for event in events:
        end = event.results_end if isinstance(event, Call) and event.results_end is not None else event.end
        assert cursor <= event.start < end <= len(text)
        cursor = end
        if isinstance(event, ParseError):
            assert event.text == text[event.start : event.end]
        else:  # a call's own span re-parses to the same call
            assert parse_calls(text[event.start : event.end]) == [
                Call(event.kind, event.fields, 0, event.end - event.start)
            ]
    assert isinstance(strip_calls(text), str)


_PARTS = st.sampled_from(
    [
        "Dorothea",
        " works",
        " for",
        " Pfizer",
        ".",
        " ",
        "  ",
        "\n",
        "[",
        "[MEM_",
        "]",
        "}",
        " Noted.",
        render_write("Ann Lee", "employed by", "Pfizer"),
        render_write("Bo", "founder of", "Acme"),
        render_read(None, "employed by", "Pfizer") + render_results([("Ann Lee", "employed by", "Pfizer")]),
        render_read("Bo", None, None) + render_results([]),
        "[MEM_WRITE{broken",
        "[MEM_READ{a>>b",
    ]
)


@given(st.lists(_PARTS, max_size=12), st.integers(1, 7))
def test_the_visible_reply_only_grows_and_ends_as_the_stripped_reply(parts, chunk):
    """What a server streams: each visible prefix extends the last, none ever shows call text, and
    the last equals the final reply (strip_calls), for any text and any chunking."""
    from memory_runtime.protocol import visible_reply

    text = "".join(parts)
    final = strip_calls(text)
    shown = ""
    for end in list(range(0, len(text), chunk)) + [len(text)]:
        visible = visible_reply(text[:end])
        assert visible.startswith(shown) and final.startswith(visible), (text[:end], visible, shown, final)
        assert "[MEM_" not in visible[len(shown) :] or "[MEM_" in final
        shown = visible
    parser = StreamParser()
    parser.feed(text)
    if parser.pending is None:  # nothing held back: the whole reply is visible
        assert visible_reply(text) == final


@given(st.lists(_PARTS, max_size=12), st.integers(1, 7))
def test_the_streamed_reply_is_the_start_of_the_final_reply_whatever_the_writes_did(parts, chunk):
    """What a server streams is a prefix of the turn's final reply, whether its writes were stored
    (the reply as generated) or not (an acknowledgement alone becomes NOT_STORED): "Noted." is
    never streamed before the outcome is known."""
    from memory_runtime.protocol import ACK, NOT_STORED, streamed_reply

    text = "".join(parts)
    final = strip_calls(text)
    finals = [final, NOT_STORED if final.strip() == ACK else final]
    shown = ""
    for end in list(range(0, len(text), chunk)) + [len(text)]:
        streamed = streamed_reply(text[:end])
        assert streamed.startswith(shown) and all(f.startswith(streamed) for f in finals), (text[:end], streamed)
        shown = streamed
