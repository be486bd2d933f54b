"""A runtime's name as Multica's daemon registers it: `Claude (host)`, `Qwen Code (host)`.

The server shows the name as the runtime's title, so a user switching daemons sees the same
runtimes under the same names. Go title-cases the provider key (`providerDisplayName`) unless
its table says otherwise, and appends the device name in brackets.
"""

from __future__ import annotations

DISPLAY_NAMES = {
    "dsh": "DeepSeek Harness",
    "traecli": "Trae",
    "grok": "Grok",
    "qoderclicn": "Qoder CN",
    "qwen": "Qwen Code",
    "qwenpaw": "QwenPaw",
    "mcode": "MiniMax Code",
    "omp": "Oh-My-Pi",
}
"""Go's `runtimeDisplayNameOverrides` (with its built-in runtimes' names): the providers whose
title-cased key would read wrong."""


def runtime_name(provider: str, device: str) -> str:
    """`Claude (host)`: the provider's display name, then the device name when there is one."""
    name = DISPLAY_NAMES.get(provider) or provider[:1].upper() + provider[1:]
    return f"{name} ({device})" if device else name
