// Signing in with the organisation's OpenID Connect issuer: the authorization code flow with PKCE (S256), as a
// public client (no secret). What the flow needs across the two page loads (the state, the verifier, the token
// endpoint, the page asked for) waits in the tab's sessionStorage and is used once. The helpers that compute are
// exported so that tests can check them against RFC 7636's own example.

export const PENDING_KEY = "assent.console.oidc";

/** Bytes as base64url with no padding (RFC 7636, appendix A). */
export function base64url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A random string of base64url characters from `size` random bytes (32 bytes: 43 characters). */
export function randomString(size = 32) {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

/** The S256 code challenge of a verifier: base64url(SHA-256(verifier)). */
export async function challengeOf(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

/** The authorization request: the endpoint with the code flow's parameters added (its own query kept). */
export function authorizeUrl(endpoint, { clientId, redirectUri, scope, state, challenge }) {
  const url = new URL(endpoint);
  const params = {
    response_type: "code",
    client_id: clientId,
    redirect_uri: redirectUri,
    scope,
    state,
    code_challenge: challenge,
    code_challenge_method: "S256",
  };
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  return url.toString();
}

/** What the issuer's redirect back carries ({code, state} or {error, description, state}); null for any other
 * page load. */
export function returned(search) {
  const params = new URLSearchParams(search);
  if (params.has("error")) {
    return { error: params.get("error"), description: params.get("error_description") || "", state: params.get("state") };
  }
  if (params.has("code")) return { code: params.get("code"), state: params.get("state") };
  return null;
}

/** The issuer's endpoints from its discovery document, which must name the issuer configured. The token endpoint
 * must be on the issuer's origin: the console's policy lets the page reach that origin only. */
export async function discover(issuer) {
  const response = await fetch(`${issuer.replace(/\/$/, "")}/.well-known/openid-configuration`, {
    headers: { Accept: "application/json" },
  });
  if (!response.ok) throw new Error(`The issuer's discovery document answered HTTP ${response.status}.`);
  const doc = await response.json();
  if (doc.issuer !== issuer) throw new Error(`The discovery document names another issuer (${doc.issuer}).`);
  if (!doc.authorization_endpoint || !doc.token_endpoint) {
    throw new Error("The discovery document names no authorization or token endpoint.");
  }
  if (new URL(doc.token_endpoint).origin !== new URL(issuer).origin) {
    throw new Error(`The issuer's token endpoint is on another origin (${new URL(doc.token_endpoint).origin}).`);
  }
  const methods = doc.code_challenge_methods_supported;
  if (Array.isArray(methods) && !methods.includes("S256")) throw new Error("The issuer does not take S256 challenges.");
  return doc;
}

/** Go to the issuer to sign in; `back` is the page to open when signed in. */
export async function start(oidc, back) {
  const doc = await discover(oidc.issuer);
  const state = randomString();
  const verifier = randomString(48);
  const redirectUri = `${location.origin}${location.pathname}`;
  sessionStorage.setItem(PENDING_KEY, JSON.stringify({ state, verifier, redirectUri, tokenEndpoint: doc.token_endpoint, back }));
  const challenge = await challengeOf(verifier);
  location.assign(authorizeUrl(doc.authorization_endpoint, {
    clientId: oidc.client_id, redirectUri, scope: oidc.scope, state, challenge,
  }));
}

/** The issuer's answer (from `returned`) turned into an access token: the state must be the one this tab sent,
 * then the code is exchanged with the verifier. {token, back}; an Error whose message a person can read. */
export async function finish(oidc, answer) {
  let pending = null;
  try { pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null"); } catch { /* unreadable: none */ }
  sessionStorage.removeItem(PENDING_KEY); // one answer per sign-in, whatever it is
  if (!oidc) throw new Error("This console signs in with no issuer: paste a token.");
  if (!pending || !answer.state || answer.state !== pending.state) {
    throw new Error("The issuer's answer does not belong to a sign-in started in this tab (its state differs): sign in again.");
  }
  if (answer.error) {
    throw new Error(`The issuer refused to sign you in: ${answer.error}${answer.description ? ` (${answer.description})` : ""}.`);
  }
  let response;
  try {
    response = await fetch(pending.tokenEndpoint, {
      method: "POST",
      headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: answer.code,
        redirect_uri: pending.redirectUri,
        client_id: oidc.client_id,
        code_verifier: pending.verifier,
      }),
    });
  } catch (error) {
    throw new Error(`The issuer's token endpoint could not be reached (${error.message}).`);
  }
  let body = {};
  try { body = await response.json(); } catch { /* not JSON */ }
  if (!response.ok || typeof body.access_token !== "string") {
    const why = body.error ? `${body.error}${body.error_description ? `: ${body.error_description}` : ""}` : `HTTP ${response.status}`;
    throw new Error(`The issuer gave no access token (${why}).`);
  }
  return { token: body.access_token, back: pending.back };
}
