"""The template compiler and renderer (runner/config/templates.py) at their
edges: the branches of if/elif/else and for/else each checked, problem
positions and messages, the environments' options (StrictUndefined, no
autoescape), and the small helpers.  In-process, so mutation testing sees them.
"""

from __future__ import annotations

import re

import pytest
from jinja2.exceptions import UndefinedError

from runner.config.templates import (
    _SHELL,
    MAX_SKELETONS,
    Fields,
    Template,
    TemplateValueError,
    UnsafeTemplateError,
    _RenderedValues,
    compile_template,
    shell_skeletons,
    wrap,
)

ANY = {"v": None, "a": None, "b": None, "items": None}


def problems_of(source: str, **names) -> list[tuple[int, str]]:
    template, problems = compile_template(source, shell=True, fields_by_name=names or ANY)
    assert (template is None) == bool(problems)
    return [(p.offset, p.message) for p in problems]


def rules_of(source: str) -> list[str]:
    return [re.search(r"\[([a-z-]+)\]", message)[1] for _, message in problems_of(source)]


# --- every branch of the Jinja control flow is checked ---------------------------

EVAL = "eval {{ v }}"


@pytest.mark.parametrize(
    "source",
    [
        # Branches no value decides (one a value decides may not hold text:
        # test_chosen_text); every one is still checked.
        "{% if true %}echo {{ v }}{% else %}" + EVAL + "{% endif %}",
        "{% if true %}echo {{ v }}{% elif false %}" + EVAL + "{% endif %}",
        "{% if true %}echo {{ v }}{% elif false %}echo ok{% else %}" + EVAL + "{% endif %}",
        "{% if true %}echo ok{% elif false %}echo {{ v }}{% elif true %}" + EVAL + "{% endif %}",
        "{% for i in [1, 2] %}echo {{ i }}{% else %}" + EVAL + "{% endfor %}",
        "{% for i in items %}" + EVAL + "{% endfor %}",
        "echo start; {% if true %}echo {{ v }}{% endif %}; " + EVAL,
        "{% if true %}{% if false %}echo {{ v }}{% else %}" + EVAL + "{% endif %}{% endif %}",
    ],
)
def test_a_value_in_any_branch_is_checked(source) -> None:
    assert rules_of(source) == ["evaluating-builtin"]


def test_a_loop_body_is_checked_twice_in_a_row() -> None:
    # Alone, "{{ i }} |" is fine; twice in a row it puts a value in command position.
    assert rules_of("echo x; {% for i in items %}{{ i }} | {% endfor %}echo y") != []
    assert problems_of("{% for i in items %}echo {{ i }}; {% endfor %}") == []


def test_an_else_branch_that_prints_nothing_is_an_empty_variant() -> None:
    # Without the else, the if prints "" or its body: "cat" alone is fine.
    assert problems_of("cat {% if a %}{{ v }}{% endif %}") == []
    assert problems_of("cat {% for i in [1, 2] %}{{ i }} {% else %}none{% endfor %}") == []


def test_too_many_combinations_is_one_problem_at_the_start() -> None:
    source = "echo" + "{% if true %} {{ v }}{% endif %}" * 9  # 512 combinations
    assert problems_of(source) == [
        (
            0,
            f"more than {MAX_SKELETONS} if/for combinations to check; "
            "split the command into several steps",
        )
    ]


# --- positions and messages -----------------------------------------------------


def test_a_refused_value_is_reported_at_its_placeholder() -> None:
    source = "echo ok\necho {{ a }}\neval {{ v }}"
    ((offset, message),) = problems_of(source)
    assert offset == source.index("{{ v }}")
    assert "[evaluating-builtin]" in message


def test_problems_come_sorted_by_offset_once_per_value_and_rule() -> None:
    source = "eval {{ a }}; {% if true %}eval {{ v }}{% else %}eval {{ v }}{% endif %}"
    offsets = [offset for offset, _ in problems_of(source)]
    assert offsets == [source.index("{{ a }}"), source.index("{{ v }}"), source.rindex("{{ v }}")]
    # A loop body is checked 0, 1 and 2 times: its value is still reported once.
    assert len(problems_of("{% for i in items %}eval {{ i }}; {% endfor %}")) == 1


def test_a_value_whose_placeholder_cannot_be_found_is_reported_at_its_line() -> None:
    # A "{{" inside a string literal: the placeholders in the text no longer
    # match the values one to one, so the value's line is reported.
    source = 'echo ok\necho x; eval {{ "{{" ~ v }}'
    ((offset, _),) = problems_of(source)
    assert offset == len("echo ok\n")


def test_a_refused_tag_is_reported_at_the_start_of_its_line() -> None:
    source = "echo a\necho b\necho {{ v|e }}"
    ((offset, message),) = problems_of(source)
    assert offset == source.index("echo {{")
    assert message.startswith("the filter |e is not allowed in a run command (allowed: ")


def test_an_unknown_test_is_refused_where_it_stands_and_allowed_tests_pass() -> None:
    source = "echo ok\necho {% if v is callable %}{{ v }}{% endif %}"
    assert problems_of(source) == [
        (source.index("echo {% if"), "the test 'is callable' is not allowed in a run command")
    ]
    assert problems_of("echo {% if v is defined %}{{ v }}{% endif %}") == []


def test_a_raw_block_around_braces_is_refused_with_its_reason() -> None:
    for inner in ("{{ v }}", "{% x %}"):
        source = "echo {% raw %}" + inner + "{% endraw %}"
        assert problems_of(source) == [
            (
                0,
                "{% raw %} around {{ }} or {% %} is not allowed in a run command: "
                "the shell would get the braces, not a value",
            )
        ]


def test_one_refused_tag_per_line_and_each_line_once() -> None:
    source = "echo {{ v|e }} {{ a|e }}\n{% macro m() %}{% endmacro %}"
    messages = [m for _, m in problems_of(source)]
    assert len(messages) == 3  # two filters (one problem each), one macro
    assert messages[2].startswith("{% macro %} is not allowed in a run command (allowed: if, ")
    assert messages[2].endswith(
        "set NAME = expression, and the filters count, d, default, first, float, int, join, "
        "last, length, list, lower, replace, sort, string, trim, unique, upper): "
        "compute the value in a plain {{ }}"
    )


def test_a_nul_in_a_command_is_a_problem_at_its_offset() -> None:
    source = "echo {{ v }} a\0b\0"
    assert problems_of(source) == [(source.index("\0"), "a command may not contain NUL")]


def test_a_plain_command_with_a_tainted_variable_is_checked_with_positions() -> None:
    template, problems = compile_template(
        "echo ok\necho $V", shell=True, fields_by_name={}, tainted_env=["V"]
    )
    assert template is None
    ((offset, message),) = [(p.offset, p.message) for p in problems]
    assert offset == len("echo ok\necho ") and "[tainted-variable]" in message
    plain, problems = compile_template(
        'echo "$V"', shell=True, fields_by_name={}, tainted_env=["V"]
    )
    assert problems == [] and plain.tainted == frozenset({"V"}) and plain.is_static


def test_tainted_variables_only_matter_in_run_commands() -> None:
    text, problems = compile_template(
        'eval "$V"', shell=False, fields_by_name={}, tainted_env=["V"]
    )
    assert problems == [] and text.tainted == frozenset()
    assert text.render({}) == 'eval "$V"'


def test_secrets_named_in_a_template_get_their_own_message_at_the_name() -> None:
    source = "echo ok {{ a }} {{ secrets.token }}"
    template, problems = compile_template(source, shell=False, fields_by_name={"a": None})
    assert template is None
    assert [(p.offset, p.message) for p in problems] == [
        (
            source.index("secrets"),
            "secrets are never templated into text; give the step "
            "`secrets: {ENV_NAME: secret}` and use $ENV_NAME in the command",
        )
    ]


def test_undeclared_names_and_fields_list_what_is_declared() -> None:
    source = "{{ zed }} {{ a.nope }}"
    _, problems = compile_template(
        source, shell=False, fields_by_name={"a": frozenset({"x", "y"}), "b": None}
    )
    assert [(p.offset, p.message) for p in problems] == [
        (
            source.index("zed"),
            "undeclared name 'zed' (declared inputs: a, b; give an input `as: name` to use it here)",
        ),
        (
            source.index("a.nope"),
            "input 'a' has no field 'nope' (its schema declares: x, y)",
        ),
    ]
    _, problems = compile_template("{{ a.x }}", shell=False, fields_by_name={"a": frozenset()})
    assert problems[0].message == "input 'a' has no field 'x' (its schema declares: none)"
    _, problems = compile_template("{{ q }}", shell=False, fields_by_name={})
    assert "(declared inputs: none;" in problems[0].message


def test_a_syntax_error_is_reported_at_its_line() -> None:
    source = "line one\nline two {{ a\n"
    _, problems = compile_template(source, shell=False, fields_by_name={"a": None})
    ((offset, message),) = [(p.offset, p.message) for p in problems]
    assert offset == len("line one\n") and message.startswith("template syntax: ")


def test_the_attr_filter_and_a_variable_subscript_are_named() -> None:
    _, problems = compile_template("a\n{{ a|attr('x') }}", shell=False, fields_by_name=ANY)
    assert [(p.offset, p.message) for p in problems] == [
        (2, "templates may not use the |attr filter: it reaches outside the template sandbox")
    ]
    # A subscript by a variable is not a constant name: no crash, no problem.
    text, problems = compile_template("{{ a[b] }}", shell=False, fields_by_name=ANY)
    assert problems == [] and text.render({"a": Fields({"k": "v"}), "b": "k"}) == "v"


def test_the_run_time_refusal_names_the_line_column_and_value() -> None:
    source = "echo ok\n{% if a %}eval {{ v }}{% endif %}"
    template = Template(source, True, frozenset({"a", "v"}), _SHELL.parse(source))
    with pytest.raises(UnsafeTemplateError) as info:
        template.render({"a": True, "v": "x"})
    assert str(info.value).startswith(
        "run command refused before it ran: line 2, column 1 (value 1): "
    )


def test_a_value_rewritten_after_quoting_is_refused_with_the_reason() -> None:
    source = "echo {{ v|replace('a', 'b') }}"
    template = Template(source, True, frozenset({"v"}), _SHELL.parse(source))
    template.render({"v": "x"})  # a filter of the value itself is fine
    rewritten = "{% filter upper %}echo {{ v }}{% endfilter %}"
    template = Template(rewritten, True, frozenset({"v"}), _SHELL.parse(rewritten))
    with pytest.raises(UnsafeTemplateError) as info:
        template.render({"v": "x"})
    assert str(info.value) == (
        "run command refused before it ran: a value was changed after it was quoted "
        "(a Jinja tag that filters or escapes output); use plain {{ }}"
    )


# --- environments and helpers ---------------------------------------------------


@pytest.mark.parametrize("shell", [False, True], ids=["write", "run"])
def test_an_undefined_field_is_an_error_not_an_empty_word(shell) -> None:
    source = ("echo " if shell else "") + "{{ a.missing }}"
    template, problems = compile_template(source, shell=shell, fields_by_name={"a": None})
    assert problems == []
    with pytest.raises((UndefinedError, TemplateValueError)):
        template.render({"a": Fields({"x": 1})})


def test_write_content_is_not_html_escaped() -> None:
    text, _ = compile_template("{{ a }}", shell=False, fields_by_name={"a": None})
    assert text.render({"a": "<b> & \"q\" 'q'"}) == "<b> & \"q\" 'q'"
    shell, _ = compile_template("echo {{ a }}", shell=True, fields_by_name={"a": None})
    assert shell.render({"a": "<b>&"}) == "echo '<b>&'"


def test_write_content_prints_numbers_mappings_and_none_as_text() -> None:
    text, _ = compile_template(
        "{{ n }} {{ m }} {{ f }}",
        shell=False,
        fields_by_name=ANY | {"n": None, "m": None, "f": None},
    )
    assert text.render({"n": 5, "m": Fields({"k": 1}), "f": 2.5}) == "5 {'k': 1} 2.5"


def test_a_list_value_names_the_ways_out() -> None:
    shell, _ = compile_template("echo {{ v }}", shell=True, fields_by_name={"v": None})
    with pytest.raises(TemplateValueError) as info:
        shell.render({"v": ["a"]})
    assert str(info.value) == (
        "a list value cannot be inserted as one shell word; loop over it "
        "({% for item in ... %}{{ item }} {% endfor %}) or pick a field"
    )


def test_fields_read_like_attributes_and_like_a_mapping() -> None:
    fields = wrap({"a": {"b": [{"c": 1}]}, "k": 2})
    assert isinstance(fields, Fields)
    assert fields.a.b[0].c == 1 and fields["k"] == 2
    assert list(fields) == ["a", "k"] and len(fields) == 2
    assert repr(fields) == "{'a': {'b': [{'c': 1}]}, 'k': 2}"
    with pytest.raises(AttributeError):
        fields.missing  # noqa: B018
    assert wrap(fields) is fields and wrap("s") == "s"


def test_each_render_has_its_own_random_nonce() -> None:
    first, second = _RenderedValues(), _RenderedValues()
    assert len(first.nonce) == 16 and int(first.nonce, 16) >= 0
    assert first.nonce != second.nonce
    assert first.add("x") == f"'RV{first.nonce}x0'"
    assert first.substitute(f"a 'RV{first.nonce}x0' 'RV{second.nonce}x0'") == (
        f"a 'x' 'RV{second.nonce}x0'"
    )


def test_compiled_templates_keep_their_source() -> None:
    source = "echo {{ v }}"
    template, _ = compile_template(source, shell=True, fields_by_name={"v": None})
    assert template.source == source and not template.is_static


def test_every_undeclared_name_is_reported_after_secrets() -> None:
    source = "{{ secrets.x }} {{ zed }}"
    _, problems = compile_template(source, shell=False, fields_by_name={"a": None})
    assert [p.offset for p in problems] == [source.index("secrets"), source.index("zed")]


def test_a_static_command_is_not_parsed_without_tainted_variables() -> None:
    # The author's own text: bash reports its syntax; only values are checked.
    template, problems = compile_template("echo 'unterminated", shell=True, fields_by_name={})
    assert problems == [] and template.render({}) == "echo 'unterminated"


def test_a_line_that_starts_with_a_newline_is_the_second_line() -> None:
    _, problems = compile_template("\n{{ a", shell=False, fields_by_name={"a": None})
    assert problems[0].offset == 1


def test_problems_at_one_offset_keep_the_order_they_were_found_in() -> None:
    source = "{% macro m() %}{{ v|e }}{% endmacro %}"
    assert [m.split(" ")[0] for _, m in problems_of(source)] == ["{%", "the"]


def test_two_refused_tags_on_one_line_are_one_problem() -> None:
    source = (
        "{% macro m() %}{% endmacro %}{% macro n() %}{% endmacro %}\n{% macro o() %}{% endmacro %}"
    )
    assert [offset for offset, _ in problems_of(source)] == [0, source.index("\n") + 1]


def test_a_refused_node_without_a_tag_name_is_named_by_its_type() -> None:
    assert problems_of("echo {{ {'a': v}.a }}")[0][1].startswith("Dict is not allowed")


def test_a_set_statement_prints_nothing_into_the_script() -> None:
    # The skeleton of "{% set %}" is empty: "eval" stays a word of its own.
    assert rules_of("eval{% set w = 1 %} {{ v }}") == ["evaluating-builtin"]


def test_a_loop_that_runs_zero_times_prints_nothing() -> None:
    assert problems_of("echo {{ v }}{% for i in items %} {{ i }}{% endfor %}") == []


@pytest.mark.parametrize(
    ("source", "variants"),
    [
        ("a{% for i in items %}b{% endfor %}c", ["ac", "abc", "abbc"]),
        ("a{% for i in items %}b{% else %}e{% endfor %}c", ["aec", "abc", "abbc"]),
        # An elif is checked as an if of its own, so "neither" is one more
        # (impossible, harmless) variant: more checked, never fewer.
        ("a{% if x %}b{% elif y %}c{% else %}d{% endif %}e", ["abe", "ace", "ae", "ade"]),
        ("a{% if x %}b{% endif %}c", ["abc", "ac"]),
        ("a{% set w = 1 %}c{{ v }}", ["ac<0>"]),
    ],
)
def test_the_skeletons_are_every_text_a_template_can_print(source, variants) -> None:
    skeletons, outputs = shell_skeletons(_SHELL.parse(source), lambda i: f"<{i}>")
    assert skeletons == variants
    assert len(outputs) == source.count("{{")


# --- issue 25: the guard around each {{ }} that reads a flagged input -------------

from runner.config.templates import (  # noqa: E402
    GUARD_FILTER,
    MASKED_CONTEXT,
    InputGuard,
    OptionLikeValueError,
    guard_outputs,
)

OPT = InputGuard("'acme.x'", True, False)
SECRET = InputGuard("'acme.s'", False, True)
BOTH = InputGuard("'acme.b'", True, True)


def guarded(source: str, *, shell: bool = True, options: bool = True) -> Template:
    names = {"x": None, "s": None, "b": None, "p": None}
    template, problems = compile_template(source, shell=shell, fields_by_name=names)
    assert not problems, problems
    by_id = {"acme.x": OPT, "acme.s": SECRET, "acme.b": BOTH}
    guard_outputs(template, {"x": OPT, "s": SECRET, "b": BOTH}, by_id, options=options)
    return template


def values(**extra) -> dict:
    context = {
        "x": Fields({"v": " -zq", "w": "ok", "l": [" a", "+b"], "n": 5}),
        "s": Fields({"t": "Hidden-Word"}),
        "b": Fields({"v": "+both"}),
        "p": Fields({"v": "-plain"}),
        "session": Fields({"id": "sess_1"}),
    }
    context["inputs"] = Fields({"acme.x": context["x"], "acme.plain": context["p"]})
    return {**context, **extra}


def wrapped(template: Template) -> list[list]:
    """The guard arguments of each {{ }} that has one, in order."""
    from jinja2 import nodes

    return [
        [a.value for a in node.args]
        for node in template.tree.find_all(nodes.Filter)
        if node.name == GUARD_FILTER
    ]


@pytest.mark.parametrize(
    "source",
    [
        "ls {{ x.v | trim }}",
        "ls {{ x.w }} {{ x.v | trim }}",
        "{% set y = x.v %}{% set z = y | trim %}ls {{ z }}",  # a chain of sets
        "{% for a in x.l %}{% if true %}ls {{ a }}; {% endif %}{% endfor %}",
        "{% for a, c in [[x.v, 1]] %}ls {{ c }} {{ a | trim }}{% endfor %}",  # a tuple target
        "ls {{ inputs['acme.x'].v | trim }}",
        "ls {{ -x.n }}",
    ],
)
def test_a_word_from_a_no_leading_option_input_may_not_start_like_an_option(source) -> None:
    template = guarded(source)
    with pytest.raises(OptionLikeValueError) as caught:
        template.render(values())
    message = str(caught.value)
    assert message.startswith("the {{ }} on line 1 prints a word read from input 'acme.x', ")
    assert "which is declared no_leading_option, and that word starts with " in message
    assert message.endswith(
        "(after the template's filters): a program could read it as an option; "
        "the value is not shown"
    )
    assert "zq" not in message and "-5" not in message and "+b" not in message


def test_the_guard_names_every_flagged_input_it_reads_and_its_line() -> None:
    template = guarded("true\nls {{ x.w ~ b.v }}")
    assert wrapped(template) == [[("'acme.b'", "'acme.x'"), True, 2]]
    with pytest.raises(OptionLikeValueError) as caught:
        guarded("ls {{ b.v ~ x.w }}").render(values())
    assert "from input 'acme.b' and 'acme.x', " in str(caught.value)
    assert "starts with '+'" in str(caught.value)


def test_what_reads_no_flagged_input_is_left_alone() -> None:
    # echo: a builtin, where the runner's own check of option-like values
    # (a program's argument before --) does not apply either
    template = guarded("echo {{ p.v }} {{ session.id }} {{ inputs['acme.plain'].v }}")
    assert wrapped(template) == []
    assert template.render(values()) == "echo '-plain' 'sess_1' '-plain'"
    # text an if on a flagged input chooses (not in run: test_chosen_text)
    chosen = guarded("{% if x.n %}-n{% endif %}", shell=False)
    assert wrapped(chosen) == []
    assert chosen.render(values()) == "-n"


def test_a_computed_key_or_a_loop_over_inputs_reads_every_input() -> None:
    assert wrapped(guarded("{% for k in inputs %}ls {{ k }}{% endfor %}")) == [
        [("'acme.b'", "'acme.x'"), True, 1]
    ]
    assert wrapped(guarded("{% set k = 'acme.x' %}ls {{ inputs[k].v }}")) == [
        [("'acme.b'", "'acme.x'"), True, 1]
    ]
    assert wrapped(guarded("ls {{ inputs.other }}")) == []  # an input with no guard
    assert wrapped(guarded("ls {{ inputs['acme.s'].t }}")) == [[(), True, 1]]


def test_a_value_that_stays_a_plain_word_passes_and_is_printed_unchanged() -> None:
    template = guarded("ls {{ x.w }} {{ x.v | replace(' -', 'o') }} {{ x.n }}")
    assert template.render(values()) == "ls 'ok' 'ozq' '5'"


def test_text_templates_are_guarded_too_unless_options_are_off() -> None:
    env_value = guarded("{{ x.v | trim }}", shell=False)
    with pytest.raises(OptionLikeValueError, match="starts with '-'"):
        env_value.render(values())
    content = guarded("{{ x.v | trim }}\n{{ x.l | last }}", shell=False, options=False)
    assert wrapped(content) == []  # options off, and no secret read: no guard at all
    assert content.render(values()) == "-zq\n+b"


def test_a_rendered_secret_word_is_registered_in_every_form_unless_masked() -> None:
    from runner.core.events import _secrets, scrubbed
    from runner.core.redaction import secret_text_forms

    token = _secrets.set(())
    try:
        template = guarded("echo {{ s.t | upper }} {{ x.w }}")
        assert wrapped(template) == [[(), True, 1], [("'acme.x'",), False, 1]]
        template.render(values(**{MASKED_CONTEXT: True}))  # a preview: nothing registered
        assert _secrets.get() == ()
        assert template.render(values()) == "echo 'HIDDEN-WORD' 'ok'"
        assert set(_secrets.get()) == secret_text_forms("HIDDEN-WORD")
        assert scrubbed("SEVERHIDDEN-WORD, SEVERDHIDDEN-WORDS") == "SEVER***, SEVERD***S"
        text = guarded("{{ s.t | lower }}", shell=False, options=False)
        assert text.render(values()) == "hidden-word"
        assert "hidden-word" in _secrets.get()
    finally:
        _secrets.reset(token)


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        (
            "{% for t in [s.t, 'a'] %}echo {{ loop.previtem | default('none') | upper }}{% endfor %}",
            False,
        ),
        ("{% for t in ['a', s.t] %}echo {{ loop.nextitem | default('none') }}{% endfor %}", False),
        (
            "{% for t in [s.t, 'a'] %}{% set w = loop.previtem | default('none') %}echo {{ w }}{% endfor %}",
            False,
        ),
        # a character a word: too short to mask
        ("{% for c in s.t %}echo {{ loop.previtem | default('xyz') }}{% endfor %}", True),
    ],
)
def test_jinjas_own_loop_variable_carries_the_secret_it_iterates(source, refused) -> None:
    """Review 25's B1: ``loop.previtem`` (and ``nextitem``) hold the items of
    a loop over a secret, and were printed unmasked."""
    from runner.core.events import _secrets

    token = _secrets.set(())
    try:
        template = guarded(source)
        assert wrapped(template) and all(secret for _, secret, _ in wrapped(template))
        if refused:
            with pytest.raises(UnsafeTemplateError, match="too short to mask"):
                template.render(values())
        else:
            template.render(values())
            assert any("HIDDEN-WORD" in form.upper() for form in _secrets.get())
    finally:
        _secrets.reset(token)


def test_what_an_if_on_a_secret_prints_is_that_secret_too() -> None:
    """Review 26's B1d: a decoder written in the template printed a secret a
    character at a time from constants an ``{% if %}`` on it chose."""
    decoder = (
        "{% for c in s.t %}{% for k in 'abcdefghijklmnopqrstuvwxyz-' %}"
        "{% if c | lower == k %}echo {{ k | upper }}{% endif %}{% endfor %}{% endfor %}"
    )
    template = guarded(decoder, shell=False)  # refused in run
    assert wrapped(template) == [[(), True, 1]]
    with pytest.raises(UnsafeTemplateError, match="too short to mask"):
        template.render(values())
    # a loop's own filter decides too; an option guard does not spread this way
    filtered = guarded("{% for k in 'abc' if k in b.v %}echo {{ x.w }}{% endfor %}", shell=False)
    assert wrapped(filtered) == [[("'acme.x'",), True, 1]]
    # a {% set %} under such an if carries the secret out of it (review 28's B1f)
    plan = guarded(
        "{% if s.t == 'Hidden-Word' %}{% set p = 'gold' %}{% endif %}echo {{ p }}", shell=False
    )
    assert wrapped(plan) == [[(), True, 1]]
    # and what a loop runs over: its body and its else (review 27's B1e)
    emptied = guarded(
        "{% for k in 'hix' %}{% for c in s.t | lower | replace(k, '') %}{% else %}"
        "echo {{ k ~ '.' }}{% endfor %}{% endfor %}",
        shell=False,
    )
    assert wrapped(emptied) == [[(), True, 1]]
    with pytest.raises(UnsafeTemplateError, match="too short to mask"):
        emptied.render(values(s=Fields({"t": "hhh"})))


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ("{{ x[s.t | upper] }}", "UndefinedError"),  # review 27's S2
        ("{{ [1] | select(s.t | lower) | list }}", "TemplateRuntimeError"),  # 28's S3
        ("{{ s.t | lower | filesizeformat }}", "ValueError"),
        ("{% set k = s.t %}{% if x[k] %}a{% endif %}", "UndefinedError"),
    ],
)
def test_an_error_of_a_template_that_reads_a_secret_shows_no_message(source, kind) -> None:
    """Jinja's and the filters' messages quote what they were given."""
    from jinja2 import UndefinedError

    template = guarded(source, shell=False)
    with pytest.raises(TemplateValueError) as caught:
        template.render(values())
    assert "hidden" not in str(caught.value).lower()
    assert f"({kind}; the message is not shown" in str(caught.value)
    plain = guarded("{{ x[p.v | upper] }}", shell=False)  # no secret: Jinja's own message
    with pytest.raises(UndefinedError, match="-PLAIN"):
        plain.render(values())
    unguarded, _ = compile_template(
        "{{ x[p.v] }}", shell=False, fields_by_name={"x": None, "p": None}
    )
    with pytest.raises(UndefinedError, match="-plain"):  # no guard at all: the same
        unguarded.render(values())


def test_jinjas_loop_variable_carries_a_no_leading_option_guard_too() -> None:
    """``loop.nextitem`` of a loop over a ``no_leading_option`` list is
    checked as the item itself would be (not only secrets follow ``loop``)."""
    template = guarded("{% for a in x.l %}ls {{ loop.nextitem | default('z') }}{% endfor %}")
    with pytest.raises(OptionLikeValueError, match="starts with '\\+'"):
        template.render(values())


def test_the_constructs_the_masking_cannot_follow_are_named_with_their_lines() -> None:
    from jinja2 import Environment

    from runner.config.template_checks import untracked_constructs

    source = "{% if a %}{{ b | upper }}{% endif %}\n{% with t = s %}{{ t }}{% endwith %}"
    source += "\n{% filter upper %}x{% endfilter %}{{ namespace(v=1).v }}"
    assert untracked_constructs(Environment().parse(source)) == [
        (2, "{% with %}"),
        (3, "{% filter %}"),
        (3, "a call"),
    ]
    assert untracked_constructs(Environment().parse("{% for c in s %}{{ c }}{% endfor %}")) == []


def test_a_guard_is_compiled_in_even_after_a_first_render() -> None:
    names = {"x": None}
    # echo, a builtin: the runner's check of a program's option-like values is not in the way
    template, _ = compile_template("echo {{ x.v | trim }}", shell=True, fields_by_name=names)
    assert template.render(values()) == "echo '-zq'"  # compiled without a guard
    guard_outputs(template, {"x": OPT}, {})
    with pytest.raises(OptionLikeValueError):
        template.render(values())
    assert guard_outputs(None, {"x": OPT}, {}) is None  # nothing compiled: nothing to do
    static, _ = compile_template("ls -la", shell=True, fields_by_name=names)
    guard_outputs(static, {"x": OPT}, {})
    assert static.render({}) == "ls -la"


def test_no_template_can_name_the_guard() -> None:
    """Its name holds a colon, which no Jinja name can: a text template (which
    has no filter allow-list) cannot call it or pass it other arguments."""
    from jinja2 import TemplateSyntaxError

    assert ":" in GUARD_FILTER and ":" in MASKED_CONTEXT
    with pytest.raises(TemplateSyntaxError):
        _SHELL.parse("{{ x | runner:guard }}")


# --- issue 25: the shell and the consumers reach the checker ------------------------


def test_the_configured_shell_reaches_the_static_check() -> None:
    fields = {"v": None}
    _, problems = compile_template("echo {{ v }}", shell=True, fields_by_name=fields)
    assert problems == []
    _, problems = compile_template(
        "echo {{ v }}", shell=True, fields_by_name=fields, shell_name="python3"
    )
    assert [p.message.rsplit("[", 1)[1].split("]")[0] for p in problems] == ["shell-dialect"]
    _, problems = compile_template(
        "cat <<< {{ v }}", shell=True, fields_by_name=fields, shell_name="sh"
    )
    assert problems and all("[shell-dialect]" in p.message for p in problems)
    # a static command with a tainted env value: checked as that shell reads it
    _, problems = compile_template(
        'cat <<< "$V"', shell=True, fields_by_name={}, tainted_env=["V"], shell_name="dash"
    )
    assert problems and "[shell-dialect]" in problems[0].message
    _, problems = compile_template(
        'print("$V")', shell=True, fields_by_name={}, tainted_env=["V"], shell_name="python3"
    )
    assert problems == []  # env values only: the program reads them as data


def test_consumers_reach_the_static_and_the_run_time_check() -> None:
    fields = {"v": None}
    source = "git clone -- {{ v }} repo"
    template, problems = compile_template(source, shell=True, fields_by_name=fields)
    assert template is None and "[executor]" in problems[0].message
    template, problems = compile_template(
        source, shell=True, fields_by_name=fields, consumers=["git"]
    )
    assert problems == [] and template is not None
    assert template.consumers == frozenset({"git"})
    assert template.render({"v": "x"}) == "git clone -- 'x' repo"
    # consumers are for run commands only
    text, _ = compile_template("{{ v }}", shell=False, fields_by_name=fields, consumers=["git"])
    assert text is not None and text.consumers is None
    # the run-time check of a static command with a tainted env value sees them too
    strict = Template('git log "$V"', True, frozenset(), None, frozenset({"V"}), frozenset({"git"}))
    assert strict.render({}) == 'git log "$V"'
    default = Template('git log "$V"', True, frozenset(), None, frozenset({"V"}))
    with pytest.raises(UnsafeTemplateError, match=r"\[executor\]"):
        default.render({})


def test_the_sandboxs_shell_reaches_the_run_time_check() -> None:
    template, problems = compile_template("echo {{ v }}", shell=True, fields_by_name={"v": None})
    assert problems == [] and template is not None
    assert template.render({"v": "x"}, shell="/bin/bash") == "echo 'x'"
    assert template.render({"v": "x"}, shell="dash") == "echo 'x'"
    with pytest.raises(UnsafeTemplateError, match=r"\[shell-dialect\]"):
        template.render({"v": "x"}, shell="python3")
    static = Template('cat <<< "$V"', True, frozenset(), None, frozenset({"V"}))
    assert static.render({}) == 'cat <<< "$V"'
    with pytest.raises(UnsafeTemplateError, match=r"\[shell-dialect\]"):
        static.render({}, shell="sh")


# --- the step's env: names reach both checks (the eleventh review) -----------------


def test_a_static_env_name_reaches_the_static_and_the_run_time_check() -> None:
    """``env: {app: demo}`` exports ``app``: a value assigned to it reaches
    ``make``.  Refused by validate and, separately, at run time.  (Not
    exported, make is refused too, as any executor beside a value that is
    not named in ``consumers:``; the message says which rule.)"""
    source = "app={{ x.v }}; make -s"
    unnamed, problems = compile_template(source, shell=True, fields_by_name={"x": None})
    assert unnamed is None and "make, not named in consumers:" in problems[0].message
    refused, problems = compile_template(
        source, shell=True, fields_by_name={"x": None}, exported_env=["app"]
    )
    assert refused is None and "make runs with a value in its environment" in problems[0].message
    unchecked = Template(
        source, True, frozenset({"x"}), _SHELL.parse(source), exported=frozenset({"app"})
    )
    with pytest.raises(UnsafeTemplateError, match="make runs with a value"):
        unchecked.render({"x": Fields({"v": "x"})})


def test_a_plain_run_with_an_env_value_is_checked_in_strict_mode() -> None:
    """No ``{{ }}`` in ``run``, a templated ``env:`` value: strict mode still
    refuses a program that is not a consumer, and keeps its consumers."""
    template, problems = compile_template(
        "dbus-send --session x",
        shell=True,
        fields_by_name={},
        tainted_env=["BUS"],
        consumers=["grep"],
    )
    assert template is None and "dbus-send" in problems[0].message
    template, problems = compile_template(
        'grep -c x -- "$BUS" f',
        shell=True,
        fields_by_name={},
        tainted_env=["BUS"],
        consumers=["grep"],
    )
    assert problems == [] and template is not None
    assert template.consumers == frozenset({"grep"}) and template.tainted == frozenset({"BUS"})


def test_a_text_template_renders_values_as_they_are() -> None:
    template, problems = compile_template("{{ x.v }}", shell=False, fields_by_name={"x": None})
    assert problems == [] and template is not None
    assert template.render({"x": Fields({"v": "a 'b' $c"})}) == "a 'b' $c"
    assert template.exported == frozenset()
