"""``polite frontier serve``: the URL Frontier gRPC service (crawler-commons/url-frontier),
so that crawlers in other languages (StormCrawler on Apache Storm first) take their URLs from
a frontier with polite's politeness inside: robots.txt and each host's delays are kept before
a URL is handed out. Its modules are private; the command is its face
(docs/how-to/frontier.md)."""

__all__: list[str] = []
