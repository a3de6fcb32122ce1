#!/usr/bin/env python3
"""A scripted browser for mcpproxy's OAuth end-to-end test: opens the authorization URL it
is given (as `$BROWSER URL`), signs in on oidc-provider's development login page as the user
in $OAUTH_TEST_USER (default "alice"), grants the consent it is asked for, and follows the
redirects back to the redirect URI the login listens on. Only loopback addresses are
followed."""

import html.parser
import http.cookiejar
import ipaddress
import os
import sys
import urllib.parse
import urllib.request


class Forms(html.parser.HTMLParser):
    """The first form of a page: its action and its inputs."""

    def __init__(self):
        super().__init__()
        self.action = None
        self.fields = {}
        self.in_form = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = attrs.get("action")
            self.in_form = True
        elif tag == "input" and self.in_form and attrs.get("name"):
            self.fields[attrs["name"]] = attrs.get("value") or ""

    def handle_endtag(self, tag):
        if tag == "form":
            self.in_form = False


class LoopbackOnly(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        check(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def check(url):
    host = urllib.parse.urlsplit(url).hostname or ""
    if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
        sys.exit(f"browser.py: refusing to leave loopback: {url}")


def main():
    url = sys.argv[1]
    check(url)
    user = os.environ.get("OAUTH_TEST_USER", "alice")
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), LoopbackOnly()
    )
    response = opener.open(url, timeout=30)
    for _ in range(6):
        where = response.geturl()
        page = response.read().decode("utf-8", "replace")
        if "/interaction/" not in urllib.parse.urlsplit(where).path:
            return  # back at the redirect URI
        form = Forms()
        form.feed(page)
        if form.action is None:
            sys.exit(f"browser.py: no form on {where}")
        fields = form.fields
        if "login" in fields or "password" in fields:
            fields.update({"login": user, "password": "any"})
        action = urllib.parse.urljoin(where, form.action)
        check(action)
        body = urllib.parse.urlencode(fields).encode()
        response = opener.open(action, data=body, timeout=30)
    sys.exit("browser.py: the login did not come back to the redirect URI")


if __name__ == "__main__":
    main()
