"""Hostile and careless chat input (issue 27): templates that loop, grow, recurse or raise;
rows too large for a tokenizer; text that is not Unicode; tokenizer directories that are not
tokenizers; and the rows that used to take the quadratic path (a marker character in one
message, Qwen3's ``</think>`` in every answer), now placed turn by turn, in linear work."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

pytest.importorskip("transformers")
import chat_data  # noqa: E402

from fastaxo._reference import chat as ref  # noqa: E402
from fastaxo.chat import ChatEngine, ChatSpec, Fallback, tokenize_chat  # noqa: E402
from fastaxo.errors import (  # noqa: E402
    ChatTemplateError,
    InvalidInputError,
    RowTooLargeError,
    TemplateLimitError,
)

BIG = 10**9


def _conv(*contents: str) -> list[dict[str, str]]:
    roles = ["user", "assistant"]
    return [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]


# -- templates: every hostile one stops with one clear line, at spec creation or per row ------

# (template, error class, what the message says); each would hang, exhaust memory or crash
# transformers' own renderer (the first two are the issue's: 10^10 steps, and far more output
# than a row may have)
HOSTILE = [
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
     TemplateLimitError, "more than 100,000 steps"),
    ("{% for i in range(100000) %}{% for m in messages %}{{ m.content * 1000 }}{% endfor %}"
     "{% endfor %}", TemplateLimitError, "characters for a short probe conversation"),
    ("{{ 'x' * 1000000000 }}", TemplateLimitError, "a constant expression ('*') would build "
                                                   "1,000,000,000 items"),
    ("{{ 'x'|center(10000000000) }}", TemplateLimitError, "constant expression (do_center)"),
    ("{{ 10 ** 100000000 }}", TemplateLimitError, "10 ** 100000000 is too large"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
     "{% endfor %}{{ ns.s }}", TemplateLimitError, "renders"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
     "{% endfor %}{{ ns.s }}", TemplateLimitError, "renders"),
    ("{% set n = 1000000000 %}{{ 'x'.rjust(n) }}", TemplateLimitError, "renders"),
    ("{% set n = 1000000000 %}{{ '{:>' ~ n ~ '}' }}{{ ('{:>' ~ n ~ '}').format('x') }}",
     TemplateLimitError, "renders"),
    ("{% set s = 'x' * 100000 %}{{ s|replace('x', s) }}", TemplateLimitError, "renders"),
    ("{% macro f(n) %}{{ f(n) }}{{ f(n) }}{% endmacro %}{{ f(0) }}", ChatTemplateError,
     "recursion too deep"),
    ("{{ lipsum(1000000) }}", TemplateLimitError, "lipsum() is not available"),
    ("{{ __fastaxo_loop }}", ChatTemplateError, "the name '__fastaxo_loop' is reserved"),
    ("{% for x in %}", ChatTemplateError, "syntax error at line 1: Expected an expression"),
]


@pytest.mark.parametrize("template, error, says", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_templates_stop_with_one_line(qwen, template, error, says):
    # the probe conversations render at ChatSpec.create: most stop there
    with pytest.raises(error) as info:
        s = ChatSpec.create(qwen, template, max_steps=100_000)
        tokenize_chat([_conv("q", "a")], spec=s)
    msg = str(info.value)
    assert says in msg and "\n" not in msg and msg.startswith(("chat_template: ", "messages: "))


def test_ten_billion_steps_stop_within_the_default_bound(qwen):
    tpl = ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
           "{{ messages[0].content }}")
    with pytest.raises(TemplateLimitError, match="more than 10,000,000 steps"):
        ChatSpec.create(qwen, tpl)


ROW_ERRORS = [
    # (template, conversation, what the message says): errors of one row, named
    ("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}"
     "{% endif %}{{ m.content }}{% endfor %}", [{"role": "system", "content": "s"}],
     "messages: row 1: chat_template: no system role"),
    ("{% for m in messages %}{{ m.content }}{% if m.content == 'x' %}{{ messages.append(1) }}"
     "{% endif %}{% endfor %}", _conv("x"), "messages: row 1: chat_template: SecurityError: access "
                                            "to attribute 'append' of 'list' object is unsafe"),
    ("{% macro f(m) %}{{ f(m) if m.content == 'r' else m.content }}{% endmacro %}"
     "{% for m in messages %}{{ f(m) }}{% endfor %}", _conv("r"),
     "messages: row 1: chat_template: recursion too deep"),
]


@pytest.mark.parametrize("template, conv, says", ROW_ERRORS, ids=range(len(ROW_ERRORS)))
def test_template_errors_on_a_row_name_the_row(qwen, template, conv, says):
    spec = ChatSpec.create(qwen, template)
    with pytest.raises(ChatTemplateError) as info:
        tokenize_chat([_conv("q", "a"), conv], spec=spec)
    assert str(info.value) == says or str(info.value).startswith(says), str(info.value)
    assert "\n" not in str(info.value)


def test_templates_that_loop_within_the_bound_render_as_transformers(qwen):
    tpl = ("{% for m in messages %}{% for c in m.content %}{{ c }}{% endfor %}"
           "{% macro g(x) %}[{{ x }}]{% endmacro %}{{ g(m.role) ~ '|' }}{% endfor %}")
    spec = ChatSpec.create(qwen, tpl, max_steps=10_000)
    conv = _conv("hello", "world")
    assert spec.render([conv]) == spec._render_hf([conv])
    with pytest.raises(TemplateLimitError, match="row 0|conversation 0"):
        tokenize_chat([_conv("x" * 20_000)], spec=spec)  # 20k characters > 10k steps


# -- rows too large for a tokenizer ------------------------------------------------------------

def test_a_conversation_over_max_row_bytes_is_refused_or_skipped(qwen):
    spec = ChatSpec.create(qwen, max_row_bytes=100_000)
    rows = [_conv("q", "a"), _conv("q", "é" * 60_000), _conv("q2", "a2")]
    with pytest.raises(RowTooLargeError) as info:
        tokenize_chat(rows, spec=spec)
    e = info.value
    assert (e.row, e.max_row_bytes, e.max_length) == (1, 100_000, None) and e.length > 100_000 and "too_large='skip'" in str(e)
    res = tokenize_chat(rows, spec=spec, too_large="skip")
    assert res.too_large == [1] and res.input_ids[1] == [] and res.empty
    assert res.input_ids[0] == tokenize_chat(rows[:1], spec=spec).input_ids[0]
    assert res.input_ids[2] == tokenize_chat(rows[2:], spec=spec).input_ids[0]


def test_contents_over_the_bound_are_refused_before_any_render(qwen, monkeypatch):
    """The contents alone decide, in UTF-8 bytes: 501 x 'é' is 1,002 bytes (over 1,000), 500 is
    exactly 1,000 (rendered, and then over the bound with the template's own text)."""
    spec = ChatSpec.create(qwen, max_row_bytes=1_000)
    rendered: list[str] = []
    real = ChatSpec.render
    monkeypatch.setattr(ChatSpec, "render", lambda self, convs, **kw: rendered.extend(
        m["content"] for c in convs for m in c) or real(self, convs, **kw))
    with pytest.raises(RowTooLargeError, match=r"row 1 holds at least 1,002 bytes") as info:
        tokenize_chat([_conv("q", "a"), _conv("é" * 501)], spec=spec)
    assert (info.value.row, info.value.length, info.value.max_row_bytes) == (1, 1_002, 1_000)
    assert rendered == []  # refused before the first render
    res = tokenize_chat([_conv("é" * 501), _conv("q", "a")], spec=spec, too_large="skip")
    assert res.too_large == [0] and res.input_ids[0] == [] and len(res.input_ids[1]) > 0
    assert rendered and "é" * 501 not in rendered
    with pytest.raises(RowTooLargeError, match=r"row 0 renders to at least"):
        tokenize_chat([_conv("é" * 500)], spec=spec)  # contents at the bound; render over it


def test_prepare_measures_conversations_in_the_arrow_buffers(tmp_path, monkeypatch):
    """prepare sizes conversations from the column's buffers: the big one is never a Python
    object, the rows around it tokenize as without it, and an error in a later row names that
    row of the file."""
    from fastaxo import prepare
    from fastaxo.pipeline import columns

    tok = str(chat_data.qwen3_dir())
    rows = [_conv("q0", "a0"), _conv("q1", "a1"), _conv("q2", "x" * 5_000), _conv("q3", "a3")]
    src, ref_src = tmp_path / "in.jsonl", tmp_path / "ref.jsonl"
    src.write_text("".join(json.dumps({"messages": r}) + "\n" for r in rows))
    ref_src.write_text("".join(json.dumps({"messages": r}) + "\n" for i, r in enumerate(rows)
                               if i != 2))
    with pytest.raises(RowTooLargeError, match=r"in.jsonl row 2 \(0-based\): the conversation's "
                                               r"messages hold 5,002 bytes"):
        prepare(str(src), str(tmp_path / "o.parquet"), 512, tokenizer=tok, max_row_bytes=4_096,
                progress=False)
    seen = []
    real = columns.pylist_without
    monkeypatch.setattr(columns, "pylist_without",
                        lambda arr, skip: seen.append(skip.tolist()) or real(arr, skip))
    rep = prepare(str(src), str(tmp_path / "o.parquet"), 512, tokenizer=tok, dedupe=False,
                  max_row_bytes=4_096, overflow="drop", progress=False, strategy="nf")
    assert seen == [[2]] and rep.rows_too_large == 1
    prepare(str(ref_src), str(tmp_path / "r.parquet"), 512, tokenizer=tok, dedupe=False,
            progress=False, strategy="nf")
    import pyarrow.parquet as pq

    got, want = pq.read_table(tmp_path / "o.parquet"), pq.read_table(tmp_path / "r.parquet")
    assert got.column("input_ids").to_pylist() == want.column("input_ids").to_pylist()
    assert got.column("labels").to_pylist() == want.column("labels").to_pylist()
    # an error after the dropped row names its row of the file
    odd = [{"role": "user", "content": "q4", "name": "x"}]
    src.write_text(src.read_text() + json.dumps({"messages": odd}) + "\n")
    with pytest.raises(InvalidInputError, match=r"in.jsonl row 4 \(0-based\): messages "
                                                r"message 0 has field 'name'"):
        prepare(str(src), str(tmp_path / "o.parquet"), 512, tokenizer=tok, max_row_bytes=4_096,
                overflow="drop", progress=False)


def test_a_200_mb_row_is_refused_under_a_4_gb_memory_limit(tmp_path):
    """prepare on a 200 MB text row and a 200 MB conversation, with the address space capped at
    4 GB: one line, exit 1, no abort (HF's tokenizer aborts the process on a failed allocation;
    the row never reaches it), and with --overflow drop the rows are dropped and counted."""
    from fastaxo._core.backend import child_argv, child_env

    text = tmp_path / "text.jsonl"
    chat = tmp_path / "chat.jsonl"
    big = "lorem ipsum dolor " * (200_000_000 // 18)
    with open(text, "w") as fh:
        fh.write(json.dumps({"text": "a small row"}) + "\n")
        fh.write(json.dumps({"text": big}) + "\n")
    with open(chat, "w") as fh:
        fh.write(json.dumps({"messages": _conv("q", "a")}) + "\n")
        fh.write(json.dumps({"messages": _conv("q", big)}) + "\n")
    del big
    tok = str(chat_data.qwen3_dir())
    limit = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (4 << 30, "
             "4 << 30)); sys.argv = ['fastaxo'] + sys.argv[1:]; "
             "runpy.run_module('fastaxo', run_name='__main__')")
    for src in (text, chat):
        out = tmp_path / f"{src.stem}.parquet"
        argv = child_argv("fastaxo", "prepare", str(src), "-o", str(out), "--max-length", "4096",
                          "--tokenizer", tok, "-q")
        argv = [sys.executable, "-c", limit, *argv[argv.index("prepare"):]]
        r = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=900,
                           cwd="/")
        assert r.returncode == 1, (src, r.returncode, r.stderr[-2000:])
        # fastaxo's one line (transformers may print its own notice before it: without torch,
        # "PyTorch was not found")
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        line = r.stderr.strip().splitlines()[-1]
        assert line.startswith("fastaxo prepare: error: ") and "row 1" in line and (
            "max_row_bytes" in line), r.stderr[-2000:]
        assert not out.exists()
        r = subprocess.run(argv + ["--overflow", "drop", "--report-json", str(tmp_path / "r.json")],
                           capture_output=True, text=True, env=child_env(), timeout=900, cwd="/")
        assert r.returncode == 0, (src, r.stderr[-2000:])
        rep = json.loads((tmp_path / "r.json").read_text())
        assert rep["rows_too_large"] == 1 and rep["rows_packed"] == 1 and rep["empty_rows"] == 0, rep


# -- Unicode, empty renders, tokenizer directories ---------------------------------------------

def test_a_lone_surrogate_is_one_line_naming_the_message(qwen):
    with pytest.raises(InvalidInputError, match=r"^messages: row 1 message 1 content holds a "
                                                r"lone surrogate U\+D800 at character 2, "):
        tokenize_chat([_conv("q", "a"), _conv("q", "ab\ud800c")], qwen)
    # as JSON text with an escaped surrogate, as a careless export writes it
    with pytest.raises(InvalidInputError, match=r"row 0 message 0 content holds a lone surrogate U\+DFFF"):
        tokenize_chat([json.dumps(_conv("\udfff"))], qwen)


def test_a_conversation_that_renders_to_no_text_has_no_tokens(qwen):
    tpl = "{% for m in messages %}{% if m.role == 'assistant' %}{{ m.content }}{% endif %}{% endfor %}"
    spec = ChatSpec.create(qwen, tpl)
    res = tokenize_chat([[{"role": "user", "content": "only a question"}], _conv("q", "a")],
                        spec=spec)
    assert res.input_ids[0] == [] and res.labels[0] == [] and res.input_ids[1]
    assert res.empty == {"the conversation renders to no text": 1}


def test_tokenizer_directories_that_are_not_tokenizers(tmp_path):
    import shutil

    from fastaxo.pipeline.columns import ChatTokenizer, load_tokenizer

    half = tmp_path / "half"  # an interrupted download: the config, not the vocabulary
    half.mkdir()
    shutil.copy(chat_data.qwen3_dir() / "tokenizer_config.json", half)
    empty = tmp_path / "empty"
    empty.mkdir()
    for path in (half, empty):
        for load in (ChatTokenizer, load_tokenizer):
            with pytest.raises(InvalidInputError) as info:
                load(str(path))
            msg = str(info.value)
            assert msg.startswith(f"tokenizer: {str(path)!r} holds no vocabulary"), msg
            assert "tokenizer.json" in msg and "\n" not in msg


# -- linear work where the one-pass proof fails on some messages ------------------------------

class _Counting(ChatSpec):
    """A spec that counts its renders (work, not time: stable on a busy machine)."""

    def render(self, conversations, **extra):
        self.__dict__["renders"] = self.__dict__.get("renders", 0) + len(conversations)
        return super().render(conversations, **extra)


def _long_conversation(messages: int, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(seed)
    return _conv(*(chat_data.message(rng, 5, 30) for _ in range(messages)))


def _counting_spec(qwen) -> _Counting:
    base = ChatSpec.create(qwen)
    return _Counting(**{f: getattr(base, f) for f in base.__dataclass_fields__})


@pytest.mark.parametrize("damage", ["marker", "think"])
def test_long_conversation_with_a_rewritten_message_takes_a_few_renders(qwen, damage):
    """2,000 messages: one with a private-use character (the old marker), or '</think>' in
    every answer (Qwen3 rewrites each): a handful of renders, not one per turn (the old path
    rendered 2 x 1,000 times, 58 s). Two of them are the frame of the row's roles, which this
    row's text does not read as when the answers are rewritten."""
    conv = _long_conversation(2000)
    if damage == "marker":
        conv[1001]["content"] += "\ue000\ue001\U000F0000"
    else:
        for m in conv[1::2]:
            m["content"] = "<think>\nstep by step\n</think>\n\n" + m["content"]
    spec = _counting_spec(qwen)
    res = tokenize_chat([conv], spec=spec)
    assert res.fallbacks == {}
    assert spec.__dict__["renders"] <= 14, spec.__dict__["renders"]
    # the same as Axolotl's algorithm, on a prefix short enough for it (it is quadratic)
    short = conv[:60]
    assert tokenize_chat([short], spec=spec).to_dict() == {
        k: [v] for k, v in ref.tokenize_conversation(short, spec).items()}


def test_think_turns_equal_axolotls_algorithm(spec):
    rng = random.Random(5)
    convs = []
    for _ in range(30):
        conv = _long_conversation(rng.randint(2, 12), seed=rng.randint(0, 1000))
        for m in conv[1::2]:
            if rng.random() < 0.7:
                m["content"] = (rng.choice(["<think>\n", "", "\n<think>"]) + "reason "
                                + rng.choice(["\n</think>\n\n", "</think>", "</think></think>x"])
                                + m["content"])
        convs.append(conv)
    engine = ChatEngine(spec)
    got = engine.run(convs)
    assert not [g for g in got if isinstance(g, Fallback)]
    for c, g in zip(convs, got, strict=True):
        assert g == ref.tokenize_conversation(c, spec), c
    assert sum(engine.turn_counts.values()) < sum(len(c) for c in convs) // 4


# -- the renderer's hooks in C: the same texts and the same bounds as the Python ones ----------

HOOKS = [
    # each exercises a case _pack.render_getattr / render_binop / render_call answer, or one
    # they must hand back to the Python hooks
    "{% for m in messages %}{{ m.role + ':' + m.content + '|' }}{% endfor %}",
    "{% for m in messages %}{{ m.missing is defined }}{{ m.get('role') }}{{ m.items()|list|length }}"
    "{% endfor %}",
    "{% set ns = namespace(n=0, s='') %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "{% set ns.s = ns.s + m.content[:1] %}{{ loop.index0 }}{{ loop.last }}{% endfor %}"
    "{{ ns.n }}{{ ns.s }}",
    "{% for m in messages %}{{ m.content.startswith('he') }}{{ m.content.split('l') }}"
    "{{ m.content.split('l', 1) }}{{ m.content.strip('h') }}{{ m.content.upper() }}"
    "{{ m.content.center(9, '*') }}{{ '{}-{}'.format(m.role, m.content) }}"
    "{{ m.content.replace('l', 'L') }}{{ m.content.find('o') }}{% endfor %}",
    "{{ messages[0].content.index('zz') }}",
    "{{ (messages|map(attribute='content')|list) + ['x'] }}{{ 1 + 2 }}{{ [1] * 3 }}",
]


@pytest.mark.parametrize("template", HOOKS, ids=range(len(HOOKS)))
def test_the_renderers_hooks_in_c_render_as_the_python_ones(qwen, template, monkeypatch):
    from fastaxo._core import backend

    # the last is too large for the row (ß.upper() is SS): refused alike
    convs = [_conv("hello", "world"), _conv("héllo wörld", "ß" * 40, ""), _conv("ß" * 1500)]
    in_c = ChatSpec.create(qwen, template, max_row_bytes=4000)
    assert in_c._fast_render().hooks == "_pack"
    with monkeypatch.context() as m:
        m.setattr(backend, "pack_ext", None)
        in_py = ChatSpec.create(qwen, template, max_row_bytes=4000)
        assert in_py._fast_render().hooks == "python"
    for conv in convs:
        got = []
        for s in (in_c, in_py):
            try:
                got.append(s.render([conv]))
            except Exception as e:  # noqa: BLE001 - the two must fail alike too
                got.append((type(e), str(e)))
        assert got[0] == got[1]
        if isinstance(got[0], list):
            assert got[0] == in_c._render_hf([conv])
