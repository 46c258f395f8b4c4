"""A small OpenID Connect provider for tests, built from Authlib's server components, served on loopback.

The authorization-code grant with OpenID Connect's code flow (and PKCE), a discovery document, a JWKS
endpoint and RS256-signed id_tokens; one confidential client and one user, who signs in on a plain
HTML form. Everything is in memory; a fresh RSA key each start.

    OIDC_PROVIDER_CLIENT_SECRET=... python -m tests.oidc_provider --port 9000 --client-id ID --redirect-uri URI
"""

from __future__ import annotations

import argparse
import html
import json
import os
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from authlib.common.security import generate_token
from authlib.oauth2 import AuthorizationServer, OAuth2Request
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc6749.requests import BasicOAuth2Payload
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7636 import CodeChallenge
from authlib.oidc.core import UserInfo, grants as oidc_grants
from authlib.oidc.core.models import AuthorizationCodeMixin
from joserfc.jwk import RSAKey

USER = {"sub": "ada", "name": "Ada Lovelace", "email": "ada@example.test"}


@dataclass
class Client(ClientMixin):
    client_id: str
    client_secret: str
    redirect_uri: str

    def get_client_id(self):
        return self.client_id

    def get_default_redirect_uri(self):
        return self.redirect_uri

    def get_allowed_scope(self, scope):
        return " ".join(s for s in (scope or "").split() if s in ("openid", "email", "profile"))

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri == self.redirect_uri

    def check_client_secret(self, client_secret):
        return client_secret == self.client_secret

    def check_endpoint_auth_method(self, method, endpoint):
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type == "authorization_code"


@dataclass
class Code(AuthorizationCodeMixin):
    code: str
    client_id: str
    redirect_uri: str
    scope: str
    nonce: str | None
    code_challenge: str | None
    code_challenge_method: str | None
    auth_time: int = field(default_factory=lambda: int(time.time()))

    def get_redirect_uri(self):
        return self.redirect_uri

    def get_scope(self):
        return self.scope

    def get_nonce(self):
        return self.nonce

    def get_auth_time(self):
        return self.auth_time


class Request(OAuth2Request):
    """An http.server request as Authlib sees one: query and form merged into the payload."""

    def __init__(self, method: str, uri: str, headers, form: dict):
        super().__init__(method, uri, headers=headers)
        self._args = dict(parse_qsl(urlsplit(uri).query))
        self._form = form
        self.payload = BasicOAuth2Payload({**self._args, **form})

    @property
    def args(self):
        return self._args

    @property
    def form(self):
        return self._form


class Provider(AuthorizationServer):
    def __init__(self, issuer: str, client: Client):
        super().__init__(scopes_supported=["openid", "email", "profile"])
        self.issuer, self.client = issuer, client
        self.key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"})
        self.codes: dict[str, Code] = {}
        self.register_token_generator("default", BearerTokenGenerator(lambda *a, **k: generate_token(42)))
        provider = self

        class CodeGrant(grants.AuthorizationCodeGrant):
            def save_authorization_code(self, code, request):
                d = request.payload.data
                provider.codes[code] = Code(
                    code,
                    request.client.get_client_id(),
                    d.get("redirect_uri"),
                    request.scope,
                    d.get("nonce"),
                    d.get("code_challenge"),
                    d.get("code_challenge_method"),
                )

            def query_authorization_code(self, code, client):
                c = provider.codes.get(code)
                return c if c and c.client_id == client.get_client_id() else None

            def delete_authorization_code(self, authorization_code):
                provider.codes.pop(authorization_code.code, None)

            def authenticate_user(self, authorization_code):
                return USER

        class OpenIDCode(oidc_grants.OpenIDCode):
            def exists_nonce(self, nonce, request):
                return any(c.nonce == nonce for c in provider.codes.values())

            def resolve_client_private_key(self, client):
                return provider.key

            def get_client_claims(self, client):
                return {"iss": provider.issuer, "aud": [client.get_client_id()]}

            def get_encode_header(self, client):
                return {"alg": "RS256", "kid": "test-key"}

            def generate_user_info(self, user, scope):
                info = UserInfo(sub=user["sub"])
                if "profile" in scope:
                    info["name"] = user["name"]
                if "email" in scope:
                    info["email"] = user["email"]
                return info

        self.register_grant(CodeGrant, [CodeChallenge(required=False), OpenIDCode(require_nonce=True)])

    def query_client(self, client_id):
        return self.client if client_id == self.client.client_id else None

    def save_token(self, token, request):
        pass  # no resource server asks for the access token back

    def create_oauth2_request(self, request):
        return request

    def handle_response(self, status, body, headers):
        return status, body, headers

    def send_signal(self, name, *args, **kwargs):
        pass

    def metadata(self) -> dict:
        i = self.issuer
        return {
            "issuer": i,
            "authorization_endpoint": f"{i}/authorize",
            "token_endpoint": f"{i}/token",
            "jwks_uri": f"{i}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": self.scopes_supported,
            "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "grant_types_supported": ["authorization_code"],
            "code_challenge_methods_supported": ["S256"],
            "claims_supported": ["sub", "name", "email", "iss", "aud", "exp", "iat", "nonce"],
        }


def login_page(params: dict, error: str = "") -> str:
    hidden = "".join(
        f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">' for k, v in params.items()
    )
    return (
        f"<!doctype html><title>Test provider: sign in</title><h1>Sign in to the test provider</h1>"
        f'<p>{html.escape(error)}</p><form method="post" action="/authorize">{hidden}'
        f'<label>User name <input name="username" autocomplete="off"></label> '
        f'<button type="submit">Sign in</button></form>'
    )


def handler_for(provider: Provider):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):  # quiet: the test reads the dashboard's log, not this one
            pass

        def request_of(self) -> Request:
            n = int(self.headers.get("Content-Length") or 0)
            form = dict(parse_qsl(self.rfile.read(n).decode())) if n else {}
            return Request(self.command, provider.issuer + self.path, self.headers, form)

        def reply(self, status: int, body, headers=(), content_type="application/json") -> None:
            data = json.dumps(body) if isinstance(body, (dict, list)) else (body or "")
            self.send_response(status)
            names = {k.lower() for k, _ in headers}
            for k, v in headers:
                self.send_header(k, v)
            if "content-type" not in names:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data.encode())))
            self.end_headers()
            self.wfile.write(data.encode())

        def do_GET(self):
            path = urlsplit(self.path).path
            if path == "/.well-known/openid-configuration":
                return self.reply(200, provider.metadata())
            if path == "/jwks":
                return self.reply(200, {"keys": [provider.key.as_dict(private=False)]})
            if path == "/authorize":
                req = self.request_of()
                try:
                    provider.get_consent_grant(req)
                except Exception as exc:  # an invalid request: say so, as a provider's error page does
                    return self.reply(400, f"invalid authorization request: {exc}", content_type="text/plain")
                return self.reply(200, login_page(req.args), content_type="text/html; charset=utf-8")
            self.reply(404, {"error": "not_found"})

        def do_POST(self):
            path = urlsplit(self.path).path
            req = self.request_of()
            if path == "/token":
                return self.reply(*provider.create_token_response(req))
            if path == "/authorize":
                params = {k: v for k, v in req.form.items() if k != "username"}
                if req.form.get("username") != USER["sub"]:
                    return self.reply(200, login_page(params, "Unknown user."), content_type="text/html; charset=utf-8")
                req = Request("GET", f"{provider.issuer}/authorize", self.headers, params)
                grant = provider.get_consent_grant(req, end_user=USER)
                return self.reply(*provider.create_authorization_response(req, grant_user=USER, grant=grant))
            self.reply(404, {"error": "not_found"})

    return Handler


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--client-id", required=True)
    p.add_argument("--redirect-uri", required=True)
    a = p.parse_args()
    issuer = f"http://127.0.0.1:{a.port}"
    secret = os.environ["OIDC_PROVIDER_CLIENT_SECRET"]  # a credential: from the environment, never argv
    provider = Provider(issuer, Client(a.client_id, secret, a.redirect_uri))
    server = ThreadingHTTPServer(("127.0.0.1", a.port), handler_for(provider))
    print(f"serving {issuer}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
