"""fastaxo's copy of transformers' chat-template Jinja environment (fastaxo.chat.environment):
equal to transformers' own by the structural check, and the check fails on any one change."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from fastaxo.chat import environment  # noqa: E402


def test_fastaxos_environment_equals_transformers():
    theirs = environment.transformers_environment()
    variant, diffs = environment.closest_variant(theirs)
    assert diffs == [], (variant, diffs)
    assert environment.environment_differences(
        theirs, environment.fastaxo_environment(variant)) == []


def _installed() -> str:
    return environment.closest_variant(environment.transformers_environment())[0]


def test_the_variants_differ_where_transformers_changed():
    plain, guarded = (environment.fastaxo_environment(v) for v in ("plain", "guarded"))
    assert environment.environment_differences(plain, guarded) == [
        "activate_tracker", "extensions[AssistantTracker]", "globals[dict]", "globals[namespace]"]
    with pytest.raises(ValueError, match="variant: expected one of"):
        environment._build("newest")


def test_the_guarded_globals_refuse_what_transformers_refuses():
    env = environment.fastaxo_environment("guarded")
    assert env.from_string("{{ dict(a=1).a }}{{ dict.fromkeys('ab', 0) | length }}"
                           "{% set ns = namespace(n=3) %}{{ ns.n }}").render() == "123"
    with pytest.raises(Exception, match="underscore-prefixed"):
        env.from_string("{% set ns = namespace(_x=1) %}").render()
    with pytest.raises(Exception, match="underscore-prefixed"):
        env.from_string("{% set ns = namespace() %}{% set ns._x = 1 %}").render()


@pytest.mark.parametrize("change, named", [
    (dict(keep_trailing_newline=True), "keep_trailing_newline"),
    (dict(trim_blocks=False), "trim_blocks"),
    (dict(lstrip_blocks=False), "lstrip_blocks"),
    (dict(autoescape=True), "autoescape"),
    (dict(extensions=["jinja2.ext.loopcontrols"]), "attributes"),
])
def test_one_option_changed_is_a_difference(change, named):
    theirs = environment.transformers_environment()
    mine = environment._build(_installed(), **change)
    diffs = environment.environment_differences(theirs, mine)
    assert diffs and any(d.startswith(named) for d in diffs), diffs


def test_a_function_changed_is_a_difference():
    import json as js

    theirs = environment.transformers_environment()
    mine = environment._build(_installed())

    def tojson(x, ensure_ascii=True, indent=None, separators=None, sort_keys=False):
        return js.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                        sort_keys=sort_keys)

    mine.filters["tojson"] = tojson
    assert environment.environment_differences(theirs, mine) == ["filters[tojson]"]
    mine = environment._build(_installed())
    mine.globals["strftime_now"] = lambda format: format
    assert environment.environment_differences(theirs, mine) == ["globals[strftime_now]"]


def test_both_render_a_template_the_same():
    tpl = ("{% for m in messages %}{% if loop.index > 3 %}{% break %}{% endif %}"
           "{% generation %}{{ m | tojson(indent=1) }}{% endgeneration %}\n  {% endfor %}"
           "{{ 'é<>' | tojson }}{{ strftime_now('%Y') }}")
    msgs = [{"role": "user", "content": f"é<{i}>"} for i in range(5)]
    theirs = environment.transformers_environment().from_string(tpl).render(messages=msgs)
    mine = [environment.fastaxo_environment(v) for v in environment.VARIANTS]
    assert [env.from_string(tpl).render(messages=msgs) for env in mine] == [theirs] * len(mine)
    assert "\"é<>\"" in theirs  # not ASCII-escaped, not HTML-escaped
    for env in (environment.transformers_environment(), *mine):
        with pytest.raises(Exception, match="^no$"):
            env.from_string("{{ raise_exception('no') }}").render()
