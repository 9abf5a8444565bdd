"""Post a message to a chat's incoming webhook (Slack, Teams and the many that copy them):
``POST URL`` with the JSON body ``{"text": ...}``.

A post that does not get a 2xx answer is an error that names the status: a review that was
never delivered must not look delivered. The webhook's URL is a secret (whoever has it can
post), so no message here repeats more of it than its scheme and host.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

TIMEOUT_SECONDS = 15.0


class PostError(Exception):
    """The message was not delivered; the text says why."""


def check_url(url: str) -> str:
    """``url`` if it is an http(s) URL with a host; else a PostError saying what is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PostError("a webhook URL must start with https:// (or http://) and name a host")
    return url


def where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def post_text(url: str, text: str, timeout: float = TIMEOUT_SECONDS) -> int:
    """Send ``{"text": text}`` to the webhook at ``url``; the HTTP status it answered."""
    check_url(url)
    try:
        response = httpx.post(url, json={"text": text}, timeout=timeout)
    except httpx.HTTPError as e:
        raise PostError(f"cannot reach the webhook at {where(url)}: {type(e).__name__}") from e
    if not 200 <= response.status_code < 300:
        body = " ".join(response.text.split())[:200]
        raise PostError(f"the webhook at {where(url)} answered HTTP {response.status_code}"
                        + (f": {body}" if body else ""))
    return response.status_code
