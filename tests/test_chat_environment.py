"""fastaxo's copy of transformers' chat-template Jinja environment (fastaxo.chat.environment):
equal to transformers' own by the structural check, and the check fails on any one change."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from fastaxo.chat import environment  # noqa: E402


def test_fastaxos_environment_equals_transformers():
    theirs = environment.transformers_environment()
    assert environment.environment_differences(theirs, environment.fastaxo_environment()) == []


@pytest.mark.parametrize("change, named", [
    (dict(keep_trailing_newline=True), "keep_trailing_newline"),
    (dict(trim_blocks=False), "trim_blocks"),
    (dict(lstrip_blocks=False), "lstrip_blocks"),
    (dict(autoescape=True), "autoescape"),
    (dict(extensions=["jinja2.ext.loopcontrols"]), "attributes"),
])
def test_one_option_changed_is_a_difference(change, named):
    theirs = environment.transformers_environment()
    mine = environment._build(**change)
    diffs = environment.environment_differences(theirs, mine)
    assert diffs and any(d.startswith(named) for d in diffs), diffs


def test_a_function_changed_is_a_difference():
    import json as js

    theirs = environment.transformers_environment()
    mine = environment._build()

    def tojson(x, ensure_ascii=True, indent=None, separators=None, sort_keys=False):
        return js.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                        sort_keys=sort_keys)

    mine.filters["tojson"] = tojson
    assert environment.environment_differences(theirs, mine) == ["filters[tojson]"]
    mine = environment._build()
    mine.globals["strftime_now"] = lambda format: format
    assert environment.environment_differences(theirs, mine) == ["globals[strftime_now]"]


def test_both_render_a_template_the_same():
    tpl = ("{% for m in messages %}{% if loop.index > 3 %}{% break %}{% endif %}"
           "{% generation %}{{ m | tojson(indent=1) }}{% endgeneration %}\n  {% endfor %}"
           "{{ 'é<>' | tojson }}{{ strftime_now('%Y') }}")
    msgs = [{"role": "user", "content": f"é<{i}>"} for i in range(5)]
    theirs = environment.transformers_environment().from_string(tpl).render(messages=msgs)
    assert environment.fastaxo_environment().from_string(tpl).render(messages=msgs) == theirs
    assert "\"é<>\"" in theirs  # not ASCII-escaped, not HTML-escaped
    for env in (environment.transformers_environment(), environment.fastaxo_environment()):
        with pytest.raises(Exception, match="^no$"):
            env.from_string("{{ raise_exception('no') }}").render()
