"""What an ACP user is told when no model is configured.

An ACP editor cannot send ``run/start`` or ``initializationOptions`` (the LSP daemon's
words for it): the agent's model comes from its own command line, its environment or
``config.toml``, and the message names those, with the file's real path.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..llm.errors import ModelConfigError
from ..llm.spec import MODEL_ENV_VAR


def config_toml() -> Path:
    """``$XDG_CONFIG_HOME/cleveragents/config.toml`` (default ``~/.config/...``), as the
    command line reads it."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "cleveragents" / "config.toml"


def no_model_message() -> str:
    return (
        f"no model is configured for this agent: set model in {config_toml()} (for example "
        f'model = "openai:gpt-4o-mini"; cleveragents config shows it), or {MODEL_ENV_VAR} '
        "in the environment your editor starts the agent with, or add --model SPEC to its "
        "command (cleveragents serve --protocol acp --model SPEC), then restart the agent; "
        "the provider's key goes in the same environment or in cleveragents keys"
    )


def require_model(default: object) -> None:
    """Refuse a turn with :func:`no_model_message` when no model is set anywhere (the
    agent's ``--model`` or ``config.toml``, folded into ``default``, and the variable)."""
    if (default is None or default == "") and not os.environ.get(MODEL_ENV_VAR):
        raise ModelConfigError(no_model_message())
