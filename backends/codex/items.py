"""Codex app-server turn notifications as the daemon's messages.

    item/started                tool_use for commandExecution, fileChange, mcpToolCall,
                                webSearch (the item id is the call id), from the moment the
                                tool starts: the idle window never runs out under a long tool
    item/completed              agentMessage → text, reasoning → thinking, a tool item →
                                tool_result (a tool_use first if none was seen)
    item/*/outputDelta          a heartbeat on the running tool (shown, never activity)
    thread/tokenUsage/updated   usage: `last` is one model call's, summed over the turn
    error                       error (`willRetry` false: the turn's failure sentence)

Items are the app-server's camelCase twins of `exec --json`'s snake_case items; the user's
own message, echoed as an item, is no output.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backends.base import Message, MessageType, Usage
from backends.codex.events import PROVIDER
from backends.codex.tool_items import APP_SERVER_ITEMS
from backends.json_lines import int_field, str_field

_QUIET_ITEMS = frozenset({"userMessage"})
_USAGE_KEYS = ("inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens")


class TurnItems:
    """One turn's items and usage, fed notification by notification."""

    def __init__(self) -> None:
        self.last_text = ""
        self.last_error = ""
        self._started: set[str] = set()
        self._spent = dict.fromkeys(_USAGE_KEYS, 0)

    def notification(self, method: str, params: Mapping[str, Any]) -> list[Message] | None:
        """The messages one turn notification stands for; None when it is not one of them."""
        if method in ("item/started", "item/completed"):
            item = params.get("item")
            if not isinstance(item, dict):
                return None
            return self._item(method.removeprefix("item/"), item)
        if method.startswith("item/") and method.endswith("Delta"):
            return self._delta(method, params)
        if method == "thread/tokenUsage/updated":
            usage = params.get("tokenUsage")
            last = usage.get("last") if isinstance(usage, dict) else None
            if isinstance(last, dict):
                for key in _USAGE_KEYS:
                    self._spent[key] += max(0, int_field(last.get(key)))
            return []
        if method == "error":
            return [self.error(params)]
        return None

    def error(self, params: Mapping[str, Any]) -> Message:
        """An `error` notification; one the CLI will not retry is the turn's failure."""
        error = params.get("error")
        text = str_field(error.get("message")) if isinstance(error, dict) else ""
        text = text or str_field(params.get("message")) or "codex reported an error"
        if params.get("willRetry") is not True:
            self.last_error = text
        return Message(MessageType.ERROR, content=text, is_error=True)

    def usage(self, model: str) -> tuple[Usage, ...]:
        """This turn's usage; input is reported without the cached part, as exec mode does."""
        spent = self._spent
        if not any(spent.values()):
            return ()
        cached = spent["cachedInputTokens"]
        return (
            Usage(
                provider=PROVIDER,
                model=model,
                input_tokens=max(0, spent["inputTokens"] - cached),
                output_tokens=spent["outputTokens"],
                cache_read_tokens=cached,
                cache_write_tokens=spent["cacheWriteInputTokens"],
            ),
        )

    def _item(self, phase: str, item: Mapping[str, Any]) -> list[Message]:
        kind = str_field(item.get("type"))
        if kind in APP_SERVER_ITEMS:
            return APP_SERVER_ITEMS.messages(phase, kind, item, self._started)
        if phase != "completed" or kind in _QUIET_ITEMS:
            return []
        if kind == "agentMessage":
            self.last_text = str_field(item.get("text"))
            return [Message(MessageType.TEXT, content=self.last_text)]
        if kind == "reasoning":
            parts = item.get("summary") or item.get("content") or []
            text = "\n".join(str_field(p) for p in parts) if isinstance(parts, list) else ""
            return [Message(MessageType.THINKING, content=text)] if text else []
        return [Message(MessageType.LOG, content=f"codex item: {kind}")]

    def _delta(self, method: str, params: Mapping[str, Any]) -> list[Message]:
        item_id = str_field(params.get("itemId"))
        if item_id not in self._started:
            return []  # a message's own text deltas: the completed item carries the whole
        delta = str_field(params.get("delta"))
        return [Message(MessageType.LOG, content=delta, call_id=item_id, heartbeat=True)]
