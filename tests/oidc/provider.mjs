// The tests' OpenID provider: npm's oidc-provider (the real one, not a fake)
// on 127.0.0.1 over plain HTTP, started by tests/src/oidc.rs with one
// argument, a JSON file:
//
//   { "port": 0,                      // 0: any free port (a restart names the old one)
//     "issuer": "http://127.0.0.1:P",  // optional; by default http://127.0.0.1:<port>
//     "keys_file": "/tmp/.../keys.json",
//     "exit_with_stdin": true,         // exit when stdin closes (the harness holds it)
//     "accounts": [{ "sub", "email", "preferred_username", "groups": [..] }],
//     "clients": [ oidc-provider client metadata, as they are ] }
//
// keys_file holds the private signing JWKS ({"keys": [...]}, one RS256, one
// ES256 and one EdDSA (Ed25519) key, each with its kid); when the file does
// not exist, fresh keys are generated and written there.
//
// Once it listens it prints one line, `listening http://127.0.0.1:PORT`.
//
// Sign-in is oidc-provider's own development pages (devInteractions): a form
// with `login` (the account's sub) and `password` (anything), submitted by
// the button "Sign-in". Consent is not asked: every client is first-party,
// granted what it asks. The device flow is on (/device/auth, /device).
//
// Besides the provider's own endpoints, on the same port, for the tests:
//   GET /test/login?account=alice&client=mesh[&alg=ES256]
//       -> {"id_token", "access_token"}: the authorization-code flow with PKCE
//          run against this provider through its pages, as a browser would
//          (alg: the client's ID token algorithm for this one flow).
//   GET /test/device?user_code=ABCD-EFGH&account=alice
//       -> {"approved": true}: the device flow's pages (the code entered and
//          confirmed, alice signed in), as a person at a browser would.
//   GET /test/forge?account=alice[&aud=mesh][&exp_offset=600][&iss=..]
//                  [&alg=RS256][&unknown_key=1][&groups=a,b]
//       -> a JWT (text) signed with this provider's current key of alg (or,
//          with unknown_key=1, a fresh key whose kid is not in the JWKS),
//          expiring exp_offset seconds from now: what a flow cannot give.

import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';

import * as jose from 'jose';
import Provider from 'oidc-provider';

const ALGS = ['RS256', 'ES256', 'EdDSA'];
const SCOPE = 'openid email profile groups';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const accounts = new Map(config.accounts.map((a) => [a.sub, a]));
const keys = await signingKeys(config.keys_file);

const server = createServer();
await new Promise((resolve) => { server.listen(config.port ?? 0, '127.0.0.1', resolve); });
const { port } = server.address();
const issuer = config.issuer ?? `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: config.clients,
  jwks: { keys },
  findAccount,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
    groups: ['groups'],
  },
  // The scopes' claims in the ID token too, not only from userinfo.
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: true },
    deviceFlow: { enabled: true },
    userinfo: { enabled: true },
  },
  enabledJWA: { idTokenSigningAlgValues: ALGS },
  loadExistingGrant,
  cookies: { keys: [randomBytes(32).toString('hex')] },
  pkce: { required: () => true },
});
provider.on('server_error', (_ctx, err) => console.error('oidc-provider:', err));

const handle = provider.callback();
server.on('request', (req, res) => {
  if (req.url.startsWith('/test/')) {
    testRoute(req, res);
  } else {
    handle(req, res);
  }
});

if (config.exit_with_stdin) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
}
console.log(`listening http://127.0.0.1:${port}`);

/** The private signing keys in `path`, made there first if it does not exist. */
async function signingKeys(path) {
  if (existsSync(path)) {
    return JSON.parse(readFileSync(path, 'utf8')).keys;
  }
  const made = [];
  for (const alg of ALGS) {
    made.push(await newKey(alg, `${alg.toLowerCase()}-${randomBytes(6).toString('hex')}`));
  }
  writeFileSync(path, JSON.stringify({ keys: made }, null, 2));
  return made;
}

/** A fresh private JWK for `alg` with `kid`. */
async function newKey(alg, kid) {
  const options = { extractable: true, ...(alg === 'EdDSA' ? { crv: 'Ed25519' } : {}) };
  const { privateKey } = await jose.generateKeyPair(alg, options);
  return { ...(await jose.exportJWK(privateKey)), alg, use: 'sig', kid };
}

/** The account whose sub is `id` (what was typed as the login), if any. */
function findAccount(_ctx, id) {
  const account = accounts.get(id);
  if (!account) {
    return undefined;
  }
  return { accountId: id, claims: () => claimsOf(account) };
}

function claimsOf(account) {
  return {
    sub: account.sub,
    email: account.email,
    email_verified: true,
    preferred_username: account.preferred_username,
    name: account.preferred_username,
    groups: account.groups,
  };
}

/** Every client is first-party: what it asks for is granted, no consent page. */
async function loadExistingGrant(ctx) {
  const { oidc } = ctx;
  const grantId = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
  if (grantId) {
    const grant = await oidc.provider.Grant.find(grantId);
    if (grant) {
      return grant;
    }
  }
  const grant = new oidc.provider.Grant({
    clientId: oidc.client.clientId,
    accountId: oidc.session.accountId,
  });
  grant.addOIDCScope(SCOPE);
  grant.addOIDCClaims(['email', 'email_verified', 'preferred_username', 'name', 'groups']);
  await grant.save();
  return grant;
}

async function testRoute(req, res) {
  const url = new URL(req.url, issuer);
  const q = Object.fromEntries(url.searchParams);
  try {
    let body;
    if (url.pathname === '/test/login') {
      body = JSON.stringify(await serially(() => login(q)));
    } else if (url.pathname === '/test/device') {
      body = JSON.stringify(await approveDevice(q));
    } else if (url.pathname === '/test/forge') {
      body = await forge(q);
    } else {
      res.writeHead(404).end(`no test route ${url.pathname}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': body.startsWith('{') ? 'application/json' : 'text/plain' });
    res.end(body);
  } catch (err) {
    res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.stack ?? err}\n`);
  }
}

let queue = Promise.resolve();
/** Runs `fn` after every earlier one finished: a flow may set its client's alg. */
function serially(fn) {
  const run = queue.then(fn, fn);
  queue = run.catch(() => {});
  return run;
}

const b64url = (bytes) => Buffer.from(bytes).toString('base64url');

/** The authorization-code flow with PKCE through this provider's own pages. */
async function login({ account, client: clientId = 'mesh', alg }) {
  const client = await provider.Client.find(clientId);
  if (!client) throw new Error(`no client ${clientId}`);
  if (!accounts.has(account)) throw new Error(`no account ${account}`);
  if (alg !== undefined && !ALGS.includes(alg)) throw new Error(`alg ${alg} is not one of ${ALGS}`);
  const redirectUri = client.redirectUris[0];
  const verifier = b64url(randomBytes(32));
  const auth = new URL('/auth', issuer);
  auth.search = new URLSearchParams({
    client_id: clientId,
    response_type: 'code',
    scope: SCOPE,
    redirect_uri: redirectUri,
    code_challenge: b64url(createHash('sha256').update(verifier).digest()),
    code_challenge_method: 'S256',
    state: b64url(randomBytes(8)),
    nonce: b64url(randomBytes(8)),
  });
  const back = new URL(redirectUri);
  const isBack = (u) => u.origin === back.origin && u.pathname === back.pathname;
  const previous = client.idTokenSignedResponseAlg;
  if (alg) client.idTokenSignedResponseAlg = alg;
  try {
    const redirect = await drive(new Browser(), auth, account, isBack);
    const code = redirect.searchParams.get('code');
    if (!code) throw new Error(`no code in ${redirect}`);
    const form = {
      grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier,
    };
    const headers = { 'content-type': 'application/x-www-form-urlencoded' };
    if (client.tokenEndpointAuthMethod === 'client_secret_basic') {
      const basic = `${encodeURIComponent(clientId)}:${encodeURIComponent(client.clientSecret)}`;
      headers.authorization = `Basic ${Buffer.from(basic).toString('base64')}`;
    } else {
      form.client_id = clientId;
      if (client.tokenEndpointAuthMethod === 'client_secret_post') form.client_secret = client.clientSecret;
    }
    const token = await send('POST', new URL('/token', issuer), headers, new URLSearchParams(form).toString());
    if (token.status !== 200) throw new Error(`token endpoint: ${token.status} ${token.body}`);
    const { id_token, access_token } = JSON.parse(token.body);
    return { id_token, access_token };
  } finally {
    client.idTokenSignedResponseAlg = previous;
  }
}

/** The device flow's pages for `user_code`: entered, confirmed, signed in. */
async function approveDevice({ user_code: userCode, account }) {
  if (!accounts.has(account)) throw new Error(`no account ${account}`);
  const start = new URL('/device', issuer);
  start.searchParams.set('user_code', userCode);
  const end = await drive(new Browser(), start, account, () => false);
  if (!end.body.includes('Sign-in Success')) throw new Error(`the device flow ended on: ${end.body}`);
  return { approved: true };
}

/**
 * Follows redirects and submits each page's form as a person would (the
 * login form with `account` and a password, any other form as it is) until
 * a redirect to a URL `done` accepts (returned) or a page with no form
 * (returned as the response).
 */
async function drive(browser, start, account, done) {
  let res = await browser.go('GET', start);
  for (let step = 0; step < 20; step += 1) {
    if (res.status >= 300 && res.status < 400) {
      const next = new URL(res.headers.location, res.url);
      if (done(next)) return next;
      res = await browser.go('GET', next);
    } else if (res.status === 200) {
      const form = firstForm(res.body);
      if (!form) return res;
      if (form.fields.prompt === 'login') {
        form.fields.login = account;
        form.fields.password = 'any password';
      }
      res = await browser.go(form.method, new URL(form.action, res.url), form.fields);
    } else {
      throw new Error(`${res.status} from ${res.url}: ${res.body}`);
    }
  }
  throw new Error(`no end after 20 steps from ${start}`);
}

/** The first form of `html`: its action, method and named inputs' values. */
function firstForm(html) {
  const form = /<form\b([^>]*)>([\s\S]*?)<\/form>/i.exec(html);
  if (!form) return undefined;
  const attr = (tag, name) => new RegExp(`\\b${name}="([^"]*)"`, 'i').exec(tag)?.[1];
  const fields = {};
  for (const [input] of form[2].matchAll(/<input\b[^>]*>/gi)) {
    const name = attr(input, 'name');
    if (name) fields[unescapeHtml(name)] = unescapeHtml(attr(input, 'value') ?? '');
  }
  return {
    action: unescapeHtml(attr(form[1], 'action') ?? ''),
    method: (attr(form[1], 'method') ?? 'GET').toUpperCase(),
    fields,
  };
}

function unescapeHtml(text) {
  return text.replace(/&(#x[0-9a-f]+|#[0-9]+|amp|lt|gt|quot|apos);/gi, (_, e) => {
    const named = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }[e.toLowerCase()];
    if (named) return named;
    return String.fromCodePoint(e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10));
  });
}

/** One HTTP request with node:http (its set-cookie headers come as a list). */
function send(method, url, headers, body) {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method, headers }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({
        status: res.statusCode,
        headers: res.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        url: url.href,
      }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A cookie jar over `send`: what a browser keeps between pages. */
class Browser {
  jar = new Map();

  async go(method, url, form) {
    const headers = {};
    if (this.jar.size) headers.cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    let body;
    if (method === 'POST') {
      body = new URLSearchParams(form ?? {}).toString();
      headers['content-type'] = 'application/x-www-form-urlencoded';
    } else if (form) {
      url = new URL(url);
      for (const [k, v] of Object.entries(form)) url.searchParams.set(k, v);
    }
    const res = await send(method, url, headers, body);
    for (const cookie of res.headers['set-cookie'] ?? []) {
      const [pair, ...attrs] = cookie.split(';');
      const at = pair.indexOf('=');
      const name = pair.slice(0, at).trim();
      const gone = attrs.some((a) => /^\s*expires=.*1970/i.test(a) || /^\s*max-age=0\b/i.test(a));
      if (gone) this.jar.delete(name); else this.jar.set(name, pair.slice(at + 1));
    }
    return res;
  }
}

/** A JWT a real flow cannot give on demand (expired, another issuer, an unknown key). */
async function forge(q) {
  const account = accounts.get(q.account);
  if (!account) throw new Error(`no account ${q.account}`);
  const alg = q.alg ?? 'RS256';
  const jwk = q.unknown_key === '1'
    ? await newKey(alg, `unknown-${randomBytes(6).toString('hex')}`)
    : keys.find((k) => k.alg === alg);
  if (!jwk) throw new Error(`no key for ${alg}`);
  const now = Math.floor(Date.now() / 1000);
  const exp = now + Number(q.exp_offset ?? 600);
  const claims = claimsOf(account);
  delete claims.sub;
  if (q.groups !== undefined) claims.groups = q.groups === '' ? [] : q.groups.split(',');
  return new jose.SignJWT(claims)
    .setProtectedHeader({ alg, kid: jwk.kid })
    .setIssuer(q.iss ?? issuer)
    .setAudience(q.aud ?? 'mesh')
    .setSubject(account.sub)
    .setIssuedAt(Math.min(now, exp - 600))
    .setExpirationTime(exp)
    .sign(await jose.importJWK(jwk, alg));
}
