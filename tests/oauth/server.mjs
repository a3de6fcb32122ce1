// A real OAuth authorization server (oidc-provider) in front of an MCP server (the official
// TypeScript SDK) that checks every request's bearer token against it. For mcpproxy's OAuth
// end-to-end test (tests/upstream_oauth.rs); everything listens on 127.0.0.1 only.
//
//   node server.mjs [ACCESS_TOKEN_TTL_SECONDS]
//
// Prints one JSON line when both listen: {"issuer": ..., "mcp": ..., "control": ...}.
// The control endpoints (on the MCP server's port) are the test's hands:
//   GET  /test/stats   -> {"grants": {"authorization_code": n, "refresh_token": n}, "calls": n,
//                          "refused": n, "registrations": [client_id, ...],
//                          "token_errors": {"invalid_client": n, ...}, "restarts": n}
//   POST /test/revoke  -> revokes, through the authorization server's RFC 7009 revocation
//                         endpoint, every refresh token it issued (and so their grants).
//   POST /test/restart -> restarts the authorization server as a deployment with the
//                         in-memory store does: it stops listening, comes back on the same
//                         port with a new provider and an empty store, and so has forgotten
//                         every client it registered and every token it issued.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import Provider from 'oidc-provider';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

const ttl = Number(process.argv[2] || 3600);

function listen(handler) {
  return new Promise((resolve) => {
    const server = http.createServer(handler);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}

let provider;
const asServer = await listen((req, res) => provider.callback()(req, res));
const issuer = `http://127.0.0.1:${asServer.address().port}`;
let mcpUrl;
const stats = {
  grants: { authorization_code: 0, refresh_token: 0 },
  calls: 0,
  refused: 0,
  registrations: [],
  token_errors: {},
  restarts: 0,
};
const refreshTokens = new Map(); // refresh token -> client_id

const mcpServer = await listen(handleMcp);
const mcpBase = `http://127.0.0.1:${mcpServer.address().port}`;
mcpUrl = `${mcpBase}/mcp`;

// A provider with a store of its own: oidc-provider's in-memory adapter keeps clients, grants
// and tokens per provider, so a new one knows nothing of the old one's.
function makeProvider() {
  const p = new Provider(issuer, {
    features: {
      devInteractions: { enabled: true },
      registration: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => mcpUrl,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => {
          if (resource !== mcpUrl) {
            throw new Provider.errors.InvalidTarget(`unknown resource ${resource}`);
          }
          return { scope: 'mcp:tools', audience: mcpUrl, accessTokenTTL: ttl, accessTokenFormat: 'opaque' };
        },
      },
    },
    scopes: ['openid', 'offline_access', 'mcp:tools'],
    pkce: { required: () => true },
    issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
    clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' },
    ttl: { AccessToken: ttl },
  });
  p.proxy = false;
  p.on('grant.success', (ctx) => {
    const type = ctx.oidc.params.grant_type;
    if (type in stats.grants) stats.grants[type] += 1;
    const body = ctx.body || {};
    if (body.refresh_token) refreshTokens.set(body.refresh_token, ctx.oidc.client.clientId);
  });
  p.on('grant.error', (ctx, error) => {
    const code = error.error || 'server_error';
    stats.token_errors[code] = (stats.token_errors[code] || 0) + 1;
  });
  p.on('registration_create.success', (ctx, client) => stats.registrations.push(client.clientId));
  return p;
}
provider = makeProvider();

// Stops the authorization server and starts it again on the same port, its store empty.
async function restartAuthorizationServer() {
  const port = asServer.address().port;
  await new Promise((resolve) => {
    asServer.close(resolve);
    asServer.closeAllConnections();
  });
  refreshTokens.clear();
  provider = makeProvider();
  await new Promise((resolve, reject) => {
    asServer.once('error', reject);
    asServer.listen(port, '127.0.0.1', () => {
      asServer.off('error', reject);
      resolve();
    });
  });
  stats.restarts += 1;
}

function challenge(res, status = 401) {
  stats.refused += 1;
  res.writeHead(status, {
    'WWW-Authenticate': `Bearer resource_metadata="${mcpBase}/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`,
    'Content-Type': 'application/json',
  });
  res.end(JSON.stringify({ error: 'invalid_token' }));
}

async function accountOf(req) {
  const header = req.headers.authorization || '';
  if (!header.startsWith('Bearer ')) return null;
  const token = await provider.AccessToken.find(header.slice(7));
  if (!token || token.isExpired) return null;
  const grant = await provider.Grant.find(token.grantId);
  if (!grant) return null;
  const audience = [].concat(token.aud || []);
  if (!audience.includes(mcpUrl)) return null;
  return token.accountId;
}

const transports = new Map();

function makeServer(account) {
  const server = new McpServer({ name: 'oauth-protected', version: '1.0.0' });
  server.registerTool('whoami', {
    description: 'Says who the bearer token belongs to.',
    annotations: { readOnlyHint: true },
  }, async () => ({ content: [{ type: 'text', text: `account ${account}` }] }));
  server.registerTool('echo', {
    description: 'Echoes its text back.',
    inputSchema: { text: z.string() },
    annotations: { readOnlyHint: true },
  }, async ({ text }) => {
    stats.calls += 1;
    return { content: [{ type: 'text', text }] };
  });
  return server;
}

function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try { resolve(text ? JSON.parse(text) : undefined); } catch { resolve(undefined); }
    });
  });
}

async function handleMcp(req, res) {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname === '/.well-known/oauth-protected-resource/mcp') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ resource: mcpUrl, authorization_servers: [issuer], scopes_supported: ['mcp:tools'], bearer_methods_supported: ['header'] }));
    return;
  }
  if (url.pathname === '/test/stats') {
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify(stats));
    return;
  }
  if (url.pathname === '/test/revoke' && req.method === 'POST') {
    let revoked = 0;
    for (const [token, clientId] of refreshTokens) {
      const answer = await fetch(`${issuer}/token/revocation`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token, token_type_hint: 'refresh_token', client_id: clientId }),
      });
      if (answer.ok) revoked += 1;
    }
    refreshTokens.clear();
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ revoked }));
    return;
  }
  if (url.pathname === '/test/restart' && req.method === 'POST') {
    await restartAuthorizationServer();
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ restarted: stats.restarts, issuer }));
    return;
  }
  if (url.pathname !== '/mcp') {
    res.writeHead(404);
    res.end();
    return;
  }
  const account = await accountOf(req);
  if (!account) {
    challenge(res);
    return;
  }
  const body = req.method === 'POST' ? await readBody(req) : undefined;
  const sessionId = req.headers['mcp-session-id'];
  let transport = sessionId ? transports.get(sessionId) : undefined;
  if (!transport) {
    if (sessionId) {
      res.writeHead(404, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'unknown session' }, id: null }));
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => transports.set(id, transport),
    });
    transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
    await makeServer(account).connect(transport);
  }
  await transport.handleRequest(req, res, body);
}

console.log(JSON.stringify({ issuer, mcp: mcpUrl, control: mcpBase }));
