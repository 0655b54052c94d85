"""Recorded paths (fastaxo.chat.paths): a conversation's text from the path recorded on an
earlier one must be the template's render, for every template and every content; a template
that reads a content in a way the recorder does not follow records no path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))
import chat_data  # noqa: E402

from fastaxo.chat import ChatEngine, ChatSpec, Fallback, environment, paths  # noqa: E402
from fastaxo.chat.render import compile_renderer  # noqa: E402

MAX_CHARS = 1 << 20
_LOOP = "{% for m in messages %}<|{{ m.role }}|>"
_END = "<|end|>\n{% endfor %}"

# templates whose reads of a content the recorder follows: each must record paths and use them
FOLLOWED = {
    "plain": _LOOP + "{{ m.content }}" + _END,
    "plus": "{% for m in messages %}{{ '<|' + m.role + '|>' + m.content + '<|end|>' }}"
            "{% endfor %}",
    "tilde": _LOOP + "{{ m.content ~ '!' ~ loop.index }}" + _END,
    "trim": _LOOP + "{{ m.content | trim }}|{{ m.content | trim('a') }}" + _END,
    "strips": _LOOP + "{{ m.content.strip() }}|{{ m.content.lstrip('\\n') }}|"
                      "{{ m.content.rstrip(' x').strip('a') }}" + _END,
    "if": _LOOP + "{% if m.content %}{{ m.content }}{% else %}(empty){% endif %}" + _END,
    "in": _LOOP + "{% if '</think>' in m.content %}T{% endif %}{{ m.content }}" + _END,
    "eq": _LOOP + "{% if m.content == 'hi' %}HI{% elif m.content != 'x' %}{{ m.content }}"
                  "{% endif %}" + _END,
    "eq_test": _LOOP + "{% if m.content is eq('a') %}A{% endif %}{{ m.content }}" + _END,
    "affix": _LOOP + "{% if m.content.startswith(('<think>', 'a')) %}S{% endif %}"
                     "{% if m.content.endswith('</tool_response>') %}E{% endif %}"
                     "{{ m.content }}" + _END,
    "default": _LOOP + "{{ m.content | default('none', true) }}" + _END,
    "tests": _LOOP + "{% if m.content is string and m.content is defined and m.content is not "
                     "none and m.content is not mapping %}{{ m.content }}{% endif %}" + _END,
    "stored": "{% set ns = namespace(last='') %}{% for m in messages %}"
              "{% set ns.last = m.content %}{% set c = m.content %}{{ c }}{% endfor %}"
              "[{{ ns.last }}]",
    "select": "{{ messages | selectattr('content', 'equalto', 'a') | list | length }}"
              "{{ messages | rejectattr('content') | list | length }}" + _LOOP
              + "{{ m.content }}" + _END,
    "reverse_scan": "{% set ns = namespace(i=-1) %}{% for m in messages[::-1] %}"
                    "{% if ns.i < 0 and m.role == 'user' and not m.content.startswith('<') %}"
                    "{% set ns.i = loop.index0 %}{% endif %}{% endfor %}" + _LOOP
                    + "{{ ns.i }}{{ m.content }}" + _END,
}
# templates that read a content another way: no path may be recorded
UNFOLLOWED = {
    "length": _LOOP + "{{ m.content | length }}{{ m.content }}" + _END,
    "length_if": _LOOP + "{% if m.content | length > 1 %}L{% endif %}{{ m.content }}" + _END,
    "upper": _LOOP + "{{ m.content | upper }}" + _END,
    "upper_method": _LOOP + "{{ m.content.upper() }}" + _END,
    "int": _LOOP + "{{ m.content | int }}" + _END,
    "tojson": _LOOP + "{{ m.content | tojson }}" + _END,
    "replace": _LOOP + "{{ m.content | replace('a', 'b') }}" + _END,
    "split": _LOOP + "{{ m.content.split('</think>')[-1] }}" + _END,
    "index": _LOOP + "{{ m.content[0] }}{{ m.content[1:] }}" + _END,
    "iterate": _LOOP + "{% for ch in m.content %}{{ ch }}{% endfor %}" + _END,
    "macro": "{% macro w(x) %}[{{ x }}]{% endmacro %}" + _LOOP + "{{ w(m.content) }}" + _END,
    "set_block": _LOOP + "{% set b %}{{ m.content }}{% endset %}{{ b | length }}" + _END,
    "filter_block": _LOOP + "{% filter upper %}{{ m.content }}{% endfilter %}" + _END,
    "percent": _LOOP + "{{ '%s' % m.content }}" + _END,
    "format": _LOOP + "{{ '{}'.format(m.content) }}" + _END,
    "order": _LOOP + "{% if m.content < 'm' %}<{% endif %}{{ m.content }}" + _END,
    "lookup": _LOOP + "{{ {'a': 'A'}[m.content] }}{{ m.content }}" + _END,
    "join": "{{ messages | map(attribute='content') | join(',') }}",
    "sort": "{% for m in messages | sort(attribute='content') %}{{ m.role }}{% endfor %}"
            "{{ messages[0].content }}",
    "unique": "{{ messages | unique(attribute='content') | list | length }}"
              "{{ messages[0].content }}",
    "lower_test": _LOOP + "{% if m.content is lower %}l{% endif %}{{ m.content }}" + _END,
    "attribute": _LOOP + "{{ m.content.value }}{{ m.content._value }}{{ m.content }}" + _END,
    "cat_attribute": _LOOP + "{{ (m.content + 'x').parts }}{{ (m.content + 'x')._parts }}"
                     + _END,
    "changed": _LOOP + "{% if loop.changed(m.content) %}C{% endif %}{{ m.content }}" + _END,
    "string": _LOOP + "{{ m.content | string | length }}{{ m.content }}" + _END,
    "cat_read": _LOOP + "{{ (m.content ~ 'x') | length }}" + _END,
    "tilde_join": _LOOP + "{{ [m.content, 'x'] | join }}" + _END,
    # a list or str indexed by a content: the sandbox's getattr fallback (x["count"])
    "str_index": _LOOP + "{{ 'abc'[m.content] }}{{ m.content }}" + _END,
    "list_index": _LOOP + "{{ messages[m.content] }}{{ m.content }}" + _END,
    "slice_index": _LOOP + "{{ messages[m.content:] | length }}{{ m.content }}" + _END,
}

_PIECES = ("", "a", "x", "hi", " ", "\n", "\t", "<think>", "</think>", "<tool_response>",
           "</tool_response>", "é", "A", "\U00100000", "\U000f0001", "count", "upper")


def _env():
    return environment._build("plain")


_BUILT: dict[str, tuple] = {}


def _built(name, source, max_chars=MAX_CHARS):
    if name not in _BUILT:
        env = _env()
        render = compile_renderer(env, source, {}, max_steps=100_000, max_chars=max_chars)
        record = paths.compile_recorder(env, source, {}, max_steps=100_000,
                                        max_chars=max_chars)
        _BUILT[name] = (render, record)
    return _BUILT[name]


def _outcome(f, conv):
    try:
        return f(conv)
    except Exception as e:  # noqa: BLE001 - the same error either way
        return type(e)


contents = st.lists(st.sampled_from(_PIECES), max_size=4).map("".join)


@st.composite
def conversation_runs(draw):
    """Conversations of a few structures, the same structure again and again with other
    contents: the paths recorded on one are tried on the next."""
    shapes = draw(st.lists(st.lists(st.sampled_from(["user", "assistant", "system"]),
                                    min_size=1, max_size=4), min_size=1, max_size=3))
    n = draw(st.integers(1, 12))
    return [[{"role": r, "content": draw(contents)} for r in draw(st.sampled_from(shapes))]
            for _ in range(n)]


@pytest.mark.parametrize("name", sorted(FOLLOWED) + sorted(UNFOLLOWED))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(run=conversation_runs())
def test_a_recorded_path_gives_the_render(name, run):
    render, record = _built(name, {**FOLLOWED, **UNFOLLOWED}[name])
    assert record is not None
    p = paths.Paths(record, render, MAX_CHARS)
    for conv in run:
        assert _outcome(p.text, conv) == _outcome(render, conv), conv
    assert p.broken is None


@pytest.mark.parametrize("name", sorted(FOLLOWED))
def test_followed_templates_use_their_paths(name):
    """The test above could pass with no path ever used: here each followed template records
    on the first row and answers the next rows of that structure from the path."""
    render, record = _built(name, FOLLOWED[name])
    p = paths.Paths(record, render, MAX_CHARS)
    rows = [[{"role": "user", "content": c}, {"role": "assistant", "content": f" {c}b\n"}]
            for c in ("q1", "q2", "q3", "q4")]
    for conv in rows:
        assert p.text(conv) == render(conv)
    assert (p.recorded, p.hits) == (1, 3)


@pytest.mark.parametrize("name", sorted(UNFOLLOWED))
def test_unfollowed_templates_record_nothing(name):
    render, record = _built(name, UNFOLLOWED[name])
    conv = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert _outcome(render, conv) is not None
    assert record(conv) is None


def test_the_clock_is_a_guard():
    """``strftime_now`` is answered again for every row: a path recorded before the clock
    moved on is not used after."""
    env = _env()
    now = ["29 Nov 2026"]
    env.globals["strftime_now"] = lambda fmt: now[0]
    source = "Today is {{ strftime_now('%d %b %Y') }}." + FOLLOWED["plain"]
    render = compile_renderer(env, source, {}, max_steps=100_000, max_chars=MAX_CHARS)
    p = paths.Paths(paths.compile_recorder(env, source, {}, max_steps=100_000,
                                            max_chars=MAX_CHARS), render,
                    MAX_CHARS)
    conv = [{"role": "user", "content": "q"}]
    assert p.text(conv) == p.text(conv) == render(conv)
    assert (p.recorded, p.hits) == (1, 1)
    now[0] = "30 Nov 2026"
    assert p.text(conv) == render(conv) == "Today is 30 Nov 2026.<|user|>q<|end|>\n"
    assert p.hits == 1


def test_marker_characters_in_the_template_roles_or_contents():
    """The recorder writes contents as characters of plane 16: a template holding one records
    nothing; such a character in a role or a content changes nothing."""
    env = _env()
    assert paths.compile_recorder(env, "\U00100000" + FOLLOWED["plain"], {},
                                  max_steps=100, max_chars=MAX_CHARS) is None
    assert paths.compile_recorder(env, FOLLOWED["plain"], {"x": ["\U00100001"]},
                                  max_steps=100, max_chars=MAX_CHARS) is None
    render, record = _built("plain", FOLLOWED["plain"])
    p = paths.Paths(record, render, MAX_CHARS)
    for role in ("\U00100000", "u\U00100001", "\U00100000\U00100001", "\U0010fffd"):
        for content in ("", "\U00100000", "a\U00100001b"):
            conv = [{"role": role, "content": content}, {"role": "a", "content": content}]
            assert p.text(conv) == render(conv)
    assert p.broken is None


def test_a_path_that_differs_from_its_render_disables_the_paths(monkeypatch):
    """The check of each recorded path against the render it was recorded on (a fault of the
    recorder would otherwise change texts): the path is dropped, the paths are off, the texts
    stay the render's."""
    render, record = _built("plain", FOLLOWED["plain"])

    def wrong(conv):
        got = record(conv)
        values = got.values
        got.values = lambda contents: (*values(contents), "!")
        return got

    p = paths.Paths(wrong, render, MAX_CHARS)
    conv = [{"role": "user", "content": "q"}]
    assert p.text(conv) == p.text(conv) == render(conv)
    assert p.broken and (p.recorded, p.hits) == (0, 0)


def test_a_text_past_the_size_bound_is_the_renders_error():
    from fastaxo.chat.render import OutputTooLarge

    env = _env()
    render = compile_renderer(env, FOLLOWED["plain"], {}, max_steps=1000, max_chars=40)
    p = paths.Paths(paths.compile_recorder(env, FOLLOWED["plain"], {}, max_steps=1000,
                                            max_chars=40),
                    render, 40)
    assert p.text([{"role": "u", "content": "short"}]) == "<|u|>short<|end|>\n"
    with pytest.raises(OutputTooLarge):
        p.text([{"role": "u", "content": "x" * 100}])
    assert p.hits == 0


def test_other_message_fields_are_part_of_the_structure():
    source = ("{% for m in messages %}{{ m.role }}{% if m.name %}({{ m.name }}){% endif %}"
              "{{ m.name }}: {{ m.content }}{% for k, v in m.items() %}{{ k }}{% endfor %}\n"
              "{% endfor %}")
    render, record = _built("named", source)
    p = paths.Paths(record, render, MAX_CHARS)
    rows = [[{"role": "user", "name": n, "content": c}, {"role": "assistant", "content": c}]
            for n in ("bob", "", None, 1, True, "bob") for c in ("a", "b")]
    rows += [[{"content": "c", "role": "user"}], [{"role": "user", "content": "c", "x": [1]}]]
    # fields equal under == that write differently: 0.0 / -0.0, and keys 1 / True
    rows += [[{"role": "user", "name": w, "content": c}] for w in (0.0, -0.0, 0.0) for c in "ab"]
    rows += [[{"role": "user", "content": c, k: "x"}] for k in (1, True) for c in "ab"]
    for conv in rows:
        assert p.text(conv) == render(conv)
    assert p.hits >= 6


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=conversation_runs())
def test_qwen3_paths_give_its_render(run):
    """Qwen3's real template (think blocks, tool responses, the last query) through a spec:
    every text equals the bounded render's."""
    spec = _qwen3_spec()
    p = spec.paths()
    for conv in run:
        assert _outcome(p.text, conv) == _outcome(lambda c: spec.render([c])[0], conv), conv
    assert p.broken is None


def test_qwen3_takes_its_paths():
    spec = _qwen3_spec()
    p = spec.paths()
    before = p.hits
    for conv in chat_data.conversations(seed=5, n=30, turns=4):
        assert p.text(conv) == spec.render([conv])[0]
    assert p.hits - before >= 25


_QWEN3: list = []


def _qwen3_spec():
    if not _QWEN3:
        _QWEN3.append(ChatSpec.create(chat_data.qwen3_tokenizer()))
    return _QWEN3[0]


@pytest.mark.parametrize("template,placed", [
    (None, True),  # Qwen3's own
    ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}<|im_end|>\n"
     "{% endfor %}", True),
    # a placeholder answers a guard otherwise: the path does not place, the proof does
    ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
     "{% if 'zz' in m.content %}zz\n{% endif %}{% endfor %}", False),
    # a content written twice
    ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}|{{ m.content }}"
     "<|im_end|>\n{% endfor %}", False),
])
def test_rows_placed_by_their_path_equal_the_reference(monkeypatch, template, placed):
    """Rows whose trainable contents the path places skip the frame proof: their rows must
    still be Axolotl's (the reference port's), and a path that cannot place leaves the row to
    the proof."""
    from fastaxo._reference import chat as ref
    from fastaxo.chat.locate import RowState

    spec = ChatSpec.create(chat_data.qwen3_tokenizer(), template)
    calls = []
    place = RowState.place
    monkeypatch.setattr(RowState, "place", lambda self, w: (calls.append(w), place(self, w)))
    convs = chat_data.conversations(seed=9, n=24, turns=(2, 6), hi=60)
    convs += [[{"role": "user", "content": "q"}, {"role": "assistant", "content": c}]
              for c in ("a", " a ", "\n\na", "[[dummy_message]]", "dummy", "")]
    got = ChatEngine(spec).run(convs)
    for c, g in zip(convs, got, strict=True):
        if placed:
            assert not isinstance(g, Fallback), g
        if not isinstance(g, Fallback):  # (else Axolotl's code makes the row)
            assert g == ref.tokenize_conversation(c, spec), c
    assert (len(calls) > len(convs) // 2) if placed else not calls, len(calls)


def test_threads_share_one_paths_object():
    """Four threads render through one Paths at once (prepare's render thread, the plugin's
    callers): every text is the render's."""
    import threading

    render, record = _built("affix", FOLLOWED["affix"])
    p = paths.Paths(record, render, MAX_CHARS)
    convs = chat_data.conversations(seed=3, n=200, turns=(1, 5), hi=30)
    convs = [[{**m, "content": ("<think>" if k % 3 == 0 else "") + m["content"]}
              for k, m in enumerate(c)] for c in convs]
    bad: list = []

    def work(seed):
        for c in convs[seed::4] + convs:
            if p.text(c) != render(c):
                bad.append(c)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad and p.broken is None and p.hits > len(convs)


def test_a_pass_of_many_parts_reuses_its_memory_and_equals_the_reference():
    """Rows in several parts whose texts grow and shrink (the UTF-8 buffer a pass reuses,
    grown on the way; the parts' encodes beside the renders): every row is the reference
    port's."""
    from fastaxo._reference import chat as ref
    from fastaxo.chat import parts as chat_parts

    spec = _qwen3_spec()
    convs = []
    for k in range(2 * chat_parts.PART_ROWS + 90):
        hi = 400 if k % 97 == 5 else 30
        convs.append(chat_data.conversations(seed=k, n=1, turns=(2, 4), hi=hi)[0])
    got = ChatEngine(spec).run(convs)
    for c, g in zip(convs, got, strict=True):
        assert g == ref.tokenize_conversation(c, spec), c


def test_a_text_built_past_the_bound_but_not_written_is_the_renders_error():
    """The render checks every text ``+`` and ``~`` build against max_chars, written or not:
    a path checks the same sizes, so a row whose contents make one too big is rendered (and
    raises) where a shorter one takes the path."""
    from fastaxo.chat.render import OutputTooLarge

    source = ("{% for m in messages %}{% set t = m.content ~ m.content ~ m.content %}"
              "<|{{ m.role }}|>{{ m.content + '.' }}{% endfor %}")
    render, record = _built("built_big", source, max_chars=60)
    p = paths.Paths(record, render, 60)
    short = [{"role": "u", "content": "q"}]
    assert p.text(short) == p.text(short) == render(short) and p.hits == 1
    for n in (19, 20, 21, 30):
        conv = [{"role": "u", "content": "x" * n}]
        assert _outcome(p.text, conv) == _outcome(render, conv)
    assert _outcome(render, [{"role": "u", "content": "x" * 21}]) is OutputTooLarge


def test_one_message_twice_takes_no_path():
    """A conversation holding one message object twice: ``is sameas`` sees it, the
    recorder's copies would not."""
    source = ("{% if messages[0] is sameas messages[1] %}SAME{% endif %}"
              "{% for m in messages %}{{ m.content }}{% endfor %}")
    render, record = _built("sameas", source)
    p = paths.Paths(record, render, MAX_CHARS)
    m = {"role": "user", "content": "a"}
    rows = [[{"role": "user", "content": "a"}, {"role": "user", "content": "a"}], [m, m],
            [{"role": "user", "content": "b"}, {"role": "user", "content": "b"}], [m, m]]
    for conv in rows:
        assert p.text(conv) == render(conv)
    assert render([m, m]).startswith("SAME")


def test_a_long_chain_of_strips_takes_no_path():
    source = ("{% set ns = namespace(c='') %}{% for m in messages %}{% set ns.c = m.content %}"
              "{% endfor %}{% for i in range(1500) %}{% set ns.c = ns.c.strip() %}{% endfor %}"
              "{{ ns.c }}")
    render, record = _built("strips_1500", source)
    p = paths.Paths(record, render, MAX_CHARS)
    for c in (" a ", " b "):
        assert p.text([{"role": "user", "content": c}]) == c.strip()
    assert p.recorded == 0
