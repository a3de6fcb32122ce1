// A real OAuth authorization server (oidc-provider) that issues JWT access tokens (RFC 9068)
// for any resource a client names (RFC 8707 resource indicators), to two clients by the
// client_credentials grant: `alice` (groups sre, dev) and `bob` (group dev). For mcpproxy's
// client-login end-to-end test (tests/serve_client_auth.rs); listens on 127.0.0.1 only.
//
//   node issuer.mjs
//
// Prints one JSON line when it listens: {"issuer": ...}. The test's hands, on the same port:
//   POST /test/rotate            -> signs from now on with a new RSA key (the old one stays
//                                   published, as in a real rotation); {"kid": new}
//   GET  /test/expired?client=ID -> an access token for the client, signed with the current
//                                   key, whose exp is ten minutes past; ?aud=URL sets its aud
//   GET  /test/sign?client=ID&aud=URL[&iss=URL][&nbf=SECONDS]
//                                -> an access token for the client signed with the current
//                                   key, valid for ten minutes; iss overrides the issuer,
//                                   nbf puts its not-before that many seconds from now
//   GET  /test/public            -> the current key's public half: {"kid", "jwk", "spki_pem",
//                                   "pkcs1_pem", "spki_der", "pkcs1_der"} (DER in base64url)
import http from 'node:http';
import {
  generateKeyPairSync, createSign, createPrivateKey, createPublicKey, randomUUID,
} from 'node:crypto';
import Provider from 'oidc-provider';

const clients = [
  { client_id: 'alice', client_secret: 'alice-secret-0123456789', groups: ['sre', 'dev'] },
  { client_id: 'bob', client_secret: 'bob-secret-0123456789', groups: ['dev'] },
];
const groups = Object.fromEntries(clients.map((c) => [c.client_id, c.groups]));

function newKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };
}

let keys = [newKey()];
let provider;
const server = http.createServer((req, res) => {
  if (req.url.startsWith('/test/')) return control(req, res);
  return provider.callback()(req, res);
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;

function makeProvider() {
  const p = new Provider(issuer, {
    clients: clients.map(({ client_id, client_secret }) => ({
      client_id,
      client_secret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
    })),
    jwks: { keys },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx, client, oneOf) => oneOf,
        getResourceServerInfo: (ctx, resource) => ({
          scope: 'mcp:tools',
          audience: resource,
          accessTokenTTL: 600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        }),
      },
    },
    scopes: ['mcp:tools'],
    extraTokenClaims: (ctx, token) => ({ groups: groups[token.clientId] || [] }),
  });
  p.on('server_error', (ctx, err) => console.error(err));
  return p;
}
provider = makeProvider();

function b64url(value) {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

// An access token for `client`, signed with the current key, with `claims` over the usual.
function sign(client, claims) {
  const [key] = keys;
  const header = { alg: 'RS256', typ: 'at+jwt', kid: key.kid };
  const payload = {
    iss: issuer, sub: client, client_id: client, scope: 'mcp:tools',
    groups: groups[client] || [], jti: randomUUID(), ...claims,
  };
  const input = `${b64url(header)}.${b64url(payload)}`;
  const signature = createSign('RSA-SHA256').update(input)
    .sign(createPrivateKey({ key, format: 'jwk' })).toString('base64url');
  return `${input}.${signature}`;
}

function control(req, res) {
  const url = new URL(req.url, issuer);
  const reply = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (req.method === 'POST' && url.pathname === '/test/rotate') {
    const key = newKey();
    keys = [key, ...keys];
    provider = makeProvider();
    return reply(200, { kid: key.kid });
  }
  const client = url.searchParams.get('client') || 'alice';
  const aud = url.searchParams.get('aud');
  const now = Math.floor(Date.now() / 1000);
  if (req.method === 'GET' && url.pathname === '/test/expired') {
    return reply(200, { access_token: sign(client, { aud, iat: now - 1200, exp: now - 600 }) });
  }
  if (req.method === 'GET' && url.pathname === '/test/sign') {
    const claims = { aud, iat: now, exp: now + 600 };
    if (url.searchParams.has('iss')) claims.iss = url.searchParams.get('iss');
    if (url.searchParams.has('nbf')) claims.nbf = now + Number(url.searchParams.get('nbf'));
    return reply(200, { access_token: sign(client, claims) });
  }
  if (req.method === 'GET' && url.pathname === '/test/public') {
    const [key] = keys;
    const pub = createPublicKey({ key, format: 'jwk' });
    const der = (type) => pub.export({ type, format: 'der' }).toString('base64url');
    return reply(200, {
      kid: key.kid,
      jwk: { kty: key.kty, n: key.n, e: key.e, kid: key.kid, alg: key.alg, use: key.use },
      spki_pem: pub.export({ type: 'spki', format: 'pem' }),
      pkcs1_pem: pub.export({ type: 'pkcs1', format: 'pem' }),
      spki_der: der('spki'),
      pkcs1_der: der('pkcs1'),
    });
  }
  return reply(404, { error: 'unknown test endpoint' });
}

console.log(JSON.stringify({ issuer }));
