"""A client process for the lease tests: requests with polite's adapter on a shared store
(or a ``polite serve``), fetching the URLs it is given one after another once its parent
says go. Its configuration is JSON in argv[1]: ``store`` or ``service_url``, ``urls``."""

from __future__ import annotations

import json
import sys

import requests

from polite.integrations.requests import PoliteAdapter


def main() -> None:
    config = json.loads(sys.argv[1])
    adapter = PoliteAdapter(agent="LeaseBot", allow_private=True, default_delay_s=0.0,
                            store=config.get("store", "memory://"),
                            service_url=config.get("service_url"))
    with requests.Session() as session:
        session.mount("http://", adapter)
        # robots.txt fetched before the parent says go: the race is between the pages
        session.get(config["urls"][0].rsplit("/", 1)[0] + "/robots.txt", timeout=30)
        print("ready", flush=True)
        sys.stdin.readline()
        for url in config["urls"]:
            print(url, session.get(url, timeout=30).status_code, flush=True)


if __name__ == "__main__":
    main()
