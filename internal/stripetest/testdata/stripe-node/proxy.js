// Drives Stripe's official Node client through the idem proxy started by
// internal/stripetest/stripe_node_test.go (base URL in IDEM_BASE), one
// scenario a line of JSON output: what the SDK made of its last call.
// The upstream's delays come from the test (IDEM_SLOW_MS for the
// client-side timeout, IDEM_BUSY_MS for the concurrent duplicate).
'use strict';
const Stripe = require('stripe');

const base = new URL(process.env.IDEM_BASE);
const profile = process.env.IDEM_PROFILE;
const slowMS = Number(process.env.IDEM_SLOW_MS);
const busyMS = Number(process.env.IDEM_BUSY_MS);

function client(timeout) {
  return new Stripe('sk_test_idem', {
    host: base.hostname, port: base.port, protocol: 'http',
    maxNetworkRetries: 2, timeout, telemetry: false,
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// charge creates a charge for order; key null lets the SDK make its own.
function charge(stripe, order, key, extra = {}) {
  const params = { amount: 1000, currency: 'usd', metadata: { order }, ...extra };
  return stripe.charges.create(params, key ? { idempotencyKey: key } : {});
}

// outcome is what the SDK made of a call, with how long it took.
async function outcome(promise) {
  const start = Date.now();
  try {
    const res = await promise;
    const lr = res.lastResponse;
    return { ok: true, id: res.id, replayed: lr.headers['idempotent-replayed'] || '', requestId: lr.requestId || '',
      idempotencyKey: lr.idempotencyKey || '', stripeVersion: lr.apiVersion || '', ms: Date.now() - start };
  } catch (err) {
    const h = err.headers || {};
    return { ok: false, class: err.constructor.name, rawType: err.rawType || '', code: err.code || '',
      statusCode: err.statusCode || 0, requestId: err.requestId || '', retryAfter: h['retry-after'] || '',
      shouldRetry: h['stripe-should-retry'] || '', message: err.message, ms: Date.now() - start };
  }
}

const scenarios = {
  // The SDK's call times out (1 s) while the upstream charges; the SDK
  // retries with the key it made.
  async timeout(order) {
    return outcome(charge(client(1000), order, null, { metadata: { order, delay_ms: String(slowMS) } }));
  },
  // A second call with the key while the first is with the upstream.
  async concurrent(order) {
    const s = client(20000);
    const extra = { metadata: { order, delay_ms: String(busyMS) } };
    const first = outcome(charge(s, order, order, extra));
    await sleep(300);
    const second = await outcome(charge(s, order, order, extra));
    const f = await first;
    return { ...second, firstId: f.id || '', firstOk: f.ok };
  },
  async mismatch(order) {
    const s = client(10000);
    const f = await outcome(charge(s, order, order));
    return { ...(await outcome(charge(s, order, order, { amount: 2000 }))), firstOk: f.ok };
  },
  async replay(order) {
    const s = client(10000);
    const f = await outcome(charge(s, order, order));
    return { ...(await outcome(charge(s, order, order))), firstId: f.id || '', firstRequestId: f.requestId || '' };
  },
  // The upstream takes longer than the proxy's --upstream-timeout.
  async unknown(order) {
    const s = client(10000);
    const extra = { metadata: { order, delay_ms: '4000' } };
    const f = await outcome(charge(s, order, order, extra));
    return { ...(await outcome(charge(s, order, order, extra))), first: f };
  },
  // A call the upstream refuses (no currency), then the fixed call.
  async fix(order) {
    const s = client(10000);
    const f = await outcome(charge(s, order, order, { currency: undefined }));
    return { ...(await outcome(charge(s, order, order))), first: f };
  },
};

async function main() {
  const names = (process.env.IDEM_SCENARIOS || Object.keys(scenarios).join(',')).split(',');
  const lines = await Promise.all(names.map(async (name) => {
    const order = `node-${profile}-${name}`;
    return JSON.stringify({ name, order, ...(await scenarios[name](order)) }) + '\n';
  }));
  // Exit once written: idle keep-alive sockets would hold the process
  // until their timeouts.
  process.stdout.write(lines.join(''), () => process.exit(0));
}

main().catch((e) => { console.error(e); process.exit(1); });
