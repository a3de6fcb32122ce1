#!/bin/sh
# The "browser" of the conformance suite's auth scenarios (`BROWSER` for `mcpproxy upstream
# login`): the suite's authorization server answers /authorize with a redirect straight back
# to the redirect URI, so following the redirects (loopback addresses only) completes the login.
exec python3 - "$1" <<'PY'
import ipaddress, sys, urllib.parse, urllib.request

def loopback(url):
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    return parts.scheme == "http" and (host == "localhost" or ipaddress.ip_address(host).is_loopback)

class LoopbackOnly(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if not loopback(newurl):
            sys.exit(f"browser.sh: refusing to follow {newurl} (not a loopback address)")
        return super().redirect_request(req, fp, code, msg, headers, newurl)

url = sys.argv[1]
if not loopback(url):
    sys.exit(f"browser.sh: refusing to open {url} (not a loopback address)")
urllib.request.build_opener(LoopbackOnly()).open(url, timeout=20).read()
PY
