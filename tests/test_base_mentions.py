import pytest

from crewbridge.base.mentions import Mention, parse_agent, parse_mentions
from crewbridge.errors import UsageError


@pytest.mark.parametrize(
    "text, mentions, task",
    [
        ("@claude what does notes.txt say?", [Mention("claude")], "what does notes.txt say?"),
        ("@claude:haiku hi", [Mention("claude", "haiku")], "hi"),
        ("@gemini:gemini-2.5-flash x", [Mention("gemini", "gemini-2.5-flash")], "x"),
        ("  @claude @gemini compare", [Mention("claude"), Mention("gemini")], "compare"),
        ("@claude mail bob@example.com the summary", [Mention("claude")], "mail bob@example.com the summary"),
        ("@claude bump @types/node", [Mention("claude")], "bump @types/node"),
        ("@claude ask @gemini later", [Mention("claude")], "ask @gemini later"),
        ("@codex\nmulti\nline", [Mention("codex")], "multi\nline"),
    ],
)
def test_leading_mentions_and_task(text, mentions, task):
    assert parse_mentions(text) == (mentions, task)


def test_no_mention_is_a_usage_error_that_shows_how():
    with pytest.raises(UsageError, match=r'start the task with one, e\.g\. crew query "@claude'):
        parse_mentions("what does notes.txt say?")


def test_an_email_address_alone_is_not_a_mention():
    with pytest.raises(UsageError, match="no agent mentioned"):
        parse_mentions("bob@example.com says hi")


def test_mention_without_task():
    with pytest.raises(UsageError, match="no task after @claude @gemini"):
        parse_mentions("@claude @gemini   ")


@pytest.mark.parametrize(
    "spec, agent, model",
    [("@claude", "claude", None), ("claude", "claude", None), ("@gemini:flash-2", "gemini", "flash-2")],
)
def test_an_agent_is_one_mention_with_or_without_its_at(spec, agent, model):
    mention = parse_agent(spec)
    assert (mention.agent, mention.model) == (agent, model)


@pytest.mark.parametrize("spec", ["", "@", "@claude hello", "@claude @gemini", "@1x"])
def test_anything_else_is_a_usage_error(spec):
    with pytest.raises(UsageError, match="not one agent mention"):
        parse_agent(spec)


# --- arguments stay arguments: a model goes to the CLI as an argument, never as an option -----------


@pytest.mark.parametrize(
    "text, shown",
    [
        ("@claude:--dangerously-skip-permissions hi", "@claude:--dangerously-skip-permissions"),
        ("@gemini:-y hi", "@gemini:-y"),
        ("@claude @codex:--yolo compare", "@codex:--yolo"),
    ],
)
def test_a_model_that_starts_with_a_dash_is_a_usage_error(text, shown):
    with pytest.raises(UsageError) as caught:
        parse_mentions(text)
    assert str(caught.value) == (
        f"the model in '{shown}' starts with '-', so the CLI would read it as an option; "
        f"name one of its CLI's models after the colon ({shown.split(':')[0]}:MODEL) or leave it out"
    )
    assert "sonnet" not in str(caught.value)  # a model of one CLI is never suggested for another


def test_crew_chat_refuses_it_too():
    with pytest.raises(UsageError, match="starts with '-', so the CLI would read it as an option"):
        parse_agent("claude:--dangerously-skip-permissions")


def test_a_dash_inside_a_model_name_is_fine():
    assert parse_mentions("@gemini:gemini-2.5-flash-lite x")[0] == [Mention("gemini", "gemini-2.5-flash-lite")]
