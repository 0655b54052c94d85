"""How the chat engine places each trainable content in the rendered text
(fastaxo.chat.locate): from text 1 and the two placeholder renders alone (three renders a row)
where the reading is unique, else by the marker rounds. Each template here breaks one step of
that argument (a content rewritten, dropped, duplicated or reordered, a placeholder or a marker
in the data, a frame that recurs); the rows must still be the reference port's (Axolotl's
algorithm), whichever path made them."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fastaxo._core import backend
from fastaxo._reference import chat as ref

pytest.importorskip("transformers")
import chat_data  # noqa: E402

from fastaxo.chat import ChatEngine, ChatSpec, Fallback  # noqa: E402
from fastaxo.chat.locate import _parse, frame, parse  # noqa: E402

S1, S2 = ref.SENTINELS
CHATML = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
          "{% endfor %}")


class _Counting(ChatSpec):
    """A spec that counts its renders (work, not time)."""

    def render(self, conversations, **extra):
        self.__dict__["renders"] = self.__dict__.get("renders", 0) + len(conversations)
        return super().render(conversations, **extra)


def _spec(qwen, template=None, **opts):
    base = ChatSpec.create(qwen, template, **opts)
    return _Counting(**{f: getattr(base, f) for f in base.__dataclass_fields__})


def _conv(*contents, roles=("user", "assistant")):
    return [{"role": roles[i % len(roles)], "content": c} for i, c in enumerate(contents)]


def _run(spec, convs):
    """The engine's rows, each checked against the reference port (a Fallback row is made by
    that port, the caller's); the renders it took."""
    spec.__dict__["renders"] = 0
    got = ChatEngine(spec).run(convs)
    renders = spec.__dict__["renders"]
    for c, g in zip(convs, got, strict=True):
        if not isinstance(g, Fallback):
            assert g == ref.tokenize_conversation(c, spec), c
    return renders


# -- the functions ---------------------------------------------------------------------------

def test_frame_is_the_text_around_the_placeholders():
    assert frame(f"a{S1}b{S1}c", f"a{S2}b{S2}c", 2) == ["a", "b", "c"]
    assert frame(f"{S1}{S1}", f"{S2}{S2}", 2) == ["", "", ""]
    # a placeholder's text in the frame (a message that is not trained holds it)
    assert frame(f"{S1}x{S2}{S1}y", f"{S1}x{S2}{S2}y", 1) == [f"{S1}x{S2}", "y"]
    assert frame(f"{S2}{S1}", f"{S2}{S2}", 1) == [S2, ""]


@pytest.mark.parametrize("d1, d2, n", [
    (f"a{S1}b{S1}", f"a{S2}b{S2}", 1),       # a placeholder more than contents (duplicated)
    (f"a{S1}b", f"a{S2}b", 2),               # fewer (a content dropped)
    (f"a{S1}b", f"a{S2}c", 1),               # the text after them differs
    (f"a{S1}b", f"ab{S2}", 1),               # at different places
    (f"a{S1.upper()}b", f"a{S2.upper()}b", 1),  # rewritten
    (f"a{S1}b", f"aZ{S2[1:]}b", 1),          # one of them rewritten, the same length
])
def test_frame_refuses_renders_that_are_not_one_frame(d1, d2, n):
    assert frame(d1, d2, n) is None


def _w(*contents):
    return [[(0, c)] for c in contents]


# parse, and its C twin where the extension is built (the engine uses that one)
PARSERS = [parse] + ([_parse] if backend.pack_ext is not None else [])


@pytest.mark.parametrize("parse", PARSERS)
def test_parse_reads_each_content_in_its_place(parse):
    assert parse("<a>x</a><a>yy</a>", ["<a>", "</a><a>", "</a>"], _w("x", "yy")) == [
        (3, 0, 1), (11, 0, 2)]
    assert parse("AB", ["A", "B"], _w("")) == [(1, 0, 0)]
    assert parse("AaB", ["A", "", "B"], _w("a", "")) is None  # no frame between: either way
    assert parse("A|B", ["A", "|B"], _w("")) == [(1, 0, 0)]
    assert parse("T", ["T"], []) == []


@pytest.mark.parametrize("parse", PARSERS)
@pytest.mark.parametrize("text, frames, written", [
    ("<x>b</x><x>a</x>", ["<x>", "</x><x>", "</x>"], _w("a", "b")),   # the turns reordered
    ("<x>a</x><x>a</x>", ["<x>", "</x><x>", "</x>"], _w("a", "a")),   # ... or not: can't tell
    ("<x>a</x>|a</x>|", ["<x>", "</x>|", "</x>|"], _w("a", "a</x>|a")),  # an end in reach
    ("<x>a b</x>", ["<x>", "</x>"], [[(0, "a b"), (2, "a")]]),  # (the frame decides: fine)
    ("<x>ab</x>", ["<x>", "</x>"], _w("a")),                        # not written as is
])
def test_parse_refuses_a_reading_that_is_not_the_only_one(parse, text, frames, written):
    got = parse(text, frames, written)
    if written == [[(0, "a b"), (2, "a")]]:
        assert got == [(3, 0, 3)]
    else:
        assert got is None


# -- templates against Axolotl's algorithm -----------------------------------------------------

def test_qwen3_rows_take_three_renders_per_sequence_of_roles(qwen):
    """Per sequence of roles: text 1 of its first row (the later rows' texts come from the path
    recorded on it: :mod:`fastaxo.chat.paths`), and the two renders with every content a
    placeholder (all kept on the spec: a second run renders nothing)."""
    spec = _spec(qwen)
    convs = chat_data.conversations(seed=21, n=40, turns=(2, 6), hi=80)
    sequences = {tuple(m["role"] for m in c) for c in convs}
    assert len(sequences) < len(convs) / 2
    assert _run(spec, convs) == 3 * len(sequences)
    assert _run(spec, convs) == 0
    assert spec.paths().hits == 2 * len(convs) - len(sequences)


def test_rows_the_whole_frame_does_not_prove_take_three_renders(qwen):
    """A template that writes what the users say otherwise (upper case): the frame of the
    roles never reads, the rows take the placeholder renders of their trainable turns, and
    after a few sequences of roles no more frames are rendered for it."""
    tpl = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'user' %}"
           "{{ m.content | upper }}{% else %}{{ m.content }}{% endif %}<|im_end|>\n{% endfor %}")
    spec = _spec(qwen, tpl)
    convs = [_conv(*[f"q{i}" if k % 2 == 0 else f"answer {i}.{k}" for k in range(2 * (i + 1))])
             for i in range(60)]
    assert _run(spec, convs) == 3 * len(convs) + 2 * 32


def test_templates_that_look_at_what_is_not_trained(qwen):
    """The frame of the roles is made with every content a placeholder, the users' too; a
    template whose text around an answer depends on the question (or the system prompt) must
    not be read through it: each row equals Axolotl's algorithm, whichever rows came first."""
    rows = [_conv("q1", "a1", "q2", "a2"), _conv("a secret q", "a1", "q2", "a2"),
            _conv("q1", "a1", "a secret q", "a2"), _conv("q1", "a1", "q2", "a2"),
            _conv("same", "same", "q", "x"), _conv(S1, "a", S2, "b"), _conv("", "a", "", "b"),
            _conv("sys", "q", "a", roles=("system", "user", "assistant")),
            _conv("secret sys", "q", "a", roles=("system", "user", "assistant"))]
    for tpl in (
            # an answer after a secret question is written otherwise
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if loop.previtem and 'secret' "
            "in loop.previtem.content %}[after a secret]{% endif %}{{ m.content }}<|im_end|>\n"
            "{% endfor %}",
            # the system prompt decides how answers end
            "{% set end = '<|im_end|>' if 'secret' in messages[0].content else '</s>' %}"
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{{ end }}\n"
            "{% endfor %}",
            # a question's length decides
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
            "{% if m.role == 'user' and m.content | length > 4 %} (long){% endif %}<|im_end|>\n"
            "{% endfor %}",
            # the questions are counted by their text
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>"
            "{% if m.role == 'assistant' %}[{{ messages | selectattr('content', 'equalto', "
            "m.content) | list | length }}]{% endif %}\n{% endfor %}"):
        for order in (rows, rows[::-1]):
            _run(_spec(qwen, tpl), order)


@pytest.mark.parametrize("eos", ["turn", "last"])
def test_reordered_messages_with_equal_answers(qwen, eos):
    """Two answers with the same text, written last first: the frame and both contents read
    fine in message order, but which slot is which turn is not proven (the labels of
    train_on_eos='last' depend on it): the marker rounds place them."""
    tpl = ("{% for m in messages|reverse %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
           "{% endfor %}")
    spec = _spec(qwen, tpl, train_on_eos=eos)
    rows = [_conv("q1", "same answer", "q2", "same answer"),
            _conv("q1", "first answer", "q2", "second answer"),
            _conv("q1", "same", "q2", "same\n", "q3", " same ")]
    _run(spec, rows)


def test_template_that_duplicates_or_drops_a_content(qwen):
    dup = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
           "{% if m.role == 'assistant' and loop.index0 == 1 %} (again: {{ m.content }}){% endif %}"
           "<|im_end|>\n{% endfor %}")
    drop = ("{% for m in messages %}<|im_start|>{{ m.role }}\n"
            "{% if not (m.role == 'assistant' and loop.index0 == 1) %}{{ m.content }}{% endif %}"
            "<|im_end|>\n{% endfor %}")
    rows = [_conv("q1", "a1", "q2", "a2"), _conv("q1", "a1"), _conv("q1", "x", "q2", "x")]
    for tpl in (dup, drop):
        _run(_spec(qwen, tpl), rows)


def test_template_that_rewrites_a_content_or_looks_at_it(qwen):
    rows = [_conv("q1", "a secret", "q2", "plain"), _conv("q1", "abc", "q2", "ABC"),
            _conv("q", "long enough answer"), _conv("q", "short")]
    for tpl in (
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}<|im_end|>"
            "{% endfor %}",
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if 'secret' in m.content %}"
            "[hidden]{% endif %}{{ m.content }}<|im_end|>\n{% endfor %}",
            "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
            "{% if m.content | length > 10 %}<|im_end|>{% endif %}\n{% endfor %}",
            # what a turn writes depends on the turn before it
            "{% for m in messages %}{% if loop.previtem and 'secret' in loop.previtem.content %}"
            "[after a secret]{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
            "{% endfor %}"):
        _run(_spec(qwen, tpl), rows)
    rows = [_conv("q1", "a secret", "a2")]  # two answers in a row
    _run(_spec(qwen, "{% for m in messages %}{% if loop.previtem and 'secret' in "
                     "loop.previtem.content %}[after a secret]{% endif %}{{ m.content }}|"
                     "{% endfor %}", roles_to_train=["user", "assistant"]), rows)


def test_contents_that_are_placeholders_or_markers(qwen):
    mark = "\U000f0000\U000f0001"
    rows = [_conv(S1, S1, S2, S2), _conv(S2, S1), _conv(f"{S1}{S2}", S1 + S2),
            _conv("q", S1[:5]), _conv("q", S1[1:] + S2[:3]),
            _conv(mark, mark, "q", f"a{mark}b"), _conv("q", "\ue000", "r", "\ue000")]
    for spec in (_spec(qwen), _spec(qwen, CHATML), _spec(qwen, CHATML, train_on_inputs=True)):
        _run(spec, rows)


def test_frames_that_recur(qwen):
    """Consecutive answers whose text holds the template's own text between two answers: the
    frame after an answer is found inside it too."""
    between = "<|im_end|>\n<|im_start|>assistant\n"
    rows = [_conv("q", f"a{between}b", f"c{between}", f"{between}d",
                  roles=("user", "assistant", "assistant", "assistant")),
            _conv("q", "x", "x", "x", roles=("user", "assistant", "assistant", "assistant")),
            _conv("q", "", "", "", roles=("user", "assistant", "assistant", "assistant"))]
    for spec in (_spec(qwen), _spec(qwen, CHATML)):
        _run(spec, rows)
    # no text at all between two contents: any split reads
    _run(_spec(qwen, "{% for m in messages %}{{ m.content }}{% endfor %}|",
               train_on_inputs=True), [_conv("ab", "c"), _conv("a", "a"), _conv("a\n", "\na")])


def test_variants_that_read_two_ways(qwen):
    """Contents whose stripped forms and the frame could trade characters: only one reading
    may stand (else the markers decide)."""
    tpl = ("{% for m in messages %}[{{ m.role }}]{% if loop.index0 % 4 == 1 %}{{ m.content }}"
           "{% else %}{{ m.content | trim }}{% endif %}\n{% endfor %}")
    rows = [_conv("q", "x\n", "r", "\ny"), _conv("q", "\n\nx\n\n", "r", "  y  "),
            _conv("q", "x\n[assistant]", "r", "[assistant]y")]
    _run(_spec(qwen, tpl, train_on_inputs=True), rows)
    _run(_spec(qwen, tpl), rows)
    # "a\n\u3000" as is, then "\u3000\nb" trimmed; or "a" trimmed, then "\u3000\nb" as is: the
    # same text, around the same frames ("\n")
    tpl = ("{% for m in messages %}{% if m.role == 'user' %}{{ m.content | trim }}{% else %}"
           "{{ m.content }}{% endif %}{{ '\\n' }}{% endfor %}")
    rows = [_conv(f"a\n{u}", f"{u}\nb", roles=("assistant", "user")) for u in (" ", "\u3000")]
    _run(_spec(qwen, tpl, train_on_inputs=True), rows)


@pytest.mark.parametrize("parse", PARSERS)
def test_parse_work_is_bounded_by_the_text(parse):
    """One long content among many: looking for a second end within reach of the longest
    content after every turn would scan that length per turn (quadratic); past a few times
    the text's length the reading is left to the marker rounds."""
    short = [f"y{i}" for i in range(400)]
    frames = ["<0>"] + [f"</><{i}>" for i in range(1, 400)] + ["</>"]

    def text(turns):
        return "".join(f + c for f, c in zip(frames, turns, strict=False)) + frames[-1]

    assert [g[0] for g in parse(text(short), frames, _w(*short))] == [
        text(short).index(f">{c}<") + 1 for c in short]
    for turns in ([("x" * 50_000)] + short[1:], short[1:] + ["x" * 50_000]):
        assert parse(text(turns), frames, _w(*turns)) is None


@pytest.mark.skipif(backend.pack_ext is None, reason="compiled extension not loaded")
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_parse_in_c_equals_parse(data):
    """The C parse files long ways of writing by their length and ends (not hashed whole):
    ways that share a length and both ends, the same content in two turns, several ways of a
    turn, frames that recur inside contents and texts that are not the frame read the same
    as the Python parse."""
    head = data.draw(st.sampled_from(["", "p" * 20, "q" * 40]))
    pool = [head + data.draw(st.text("ab</>", max_size=30)) + head[::-1] for _ in range(4)]
    n = data.draw(st.integers(0, 7))
    written = []
    for _ in range(n):
        ways = data.draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
        written.append([(v, w) for v, w in enumerate(dict.fromkeys(ways))])
    frames = [data.draw(st.sampled_from(["<", "</>", "<x>", "", "\n"])) for _ in range(n + 1)]
    chosen = [data.draw(st.sampled_from(ws))[1] for ws in written]
    text = frames[0] + "".join(c + f for c, f in zip(chosen, frames[1:], strict=True))
    if data.draw(st.booleans()):  # damaged: a character changed or cut
        i = data.draw(st.integers(0, max(0, len(text) - 1)))
        text = text[:i] + data.draw(st.sampled_from(["", "b", "/"])) + text[i + 1:]
    for max_ends, budget in ((8, 4 * len(text) + 4096), (1, 50)):
        assert backend.pack_ext.locate_parse(text, frames, written, max_ends, budget) == (
            _parse_ref(text, frames, written, max_ends, budget))


def _parse_ref(text, frames, written, max_ends, budget):
    """locate.parse with the given bounds."""
    from unittest import mock

    from fastaxo.chat import locate

    with mock.patch.object(locate, "_MAX_ENDS", max_ends), \
            mock.patch.object(locate, "_scan_budget", lambda t: budget):
        return locate.parse(text, frames, written)
