// Drives Stripe's official Node client against a server started by
// idemhttp/stripe_node_test.go (base URL in IDEM_BASE). Each line of
// output is one JSON object: what the SDK made of one call.
'use strict';
const Stripe = require('stripe');

const base = new URL(process.env.IDEM_BASE);
const stripe = new Stripe('sk_test_idem', {
  host: base.hostname,
  port: base.port,
  protocol: 'http',
  maxNetworkRetries: 0,
  timeout: 5000,
  telemetry: false,
});

function report(name, promise) {
  return promise.then(
    (res) => ({ name, threw: false, id: res && res.id, object: res && res.object,
      replayed: res && res.lastResponse && res.lastResponse.headers['idempotent-replayed'],
      requestId: res && res.lastResponse && res.lastResponse.requestId }),
    (err) => ({ name, threw: true, class: err.constructor.name, type: err.type,
      rawType: err.raw && err.raw.type, code: err.code, statusCode: err.statusCode,
      shouldRetry: err.headers && err.headers['stripe-should-retry'] }),
  ).then((r) => process.stdout.write(JSON.stringify(r) + '\n'));
}

async function main() {
  const anchors = (process.env.IDEM_ANCHORS || '').split(',').filter(Boolean);
  for (const a of anchors) {
    await report('problem:' + a, stripe.rawRequest('POST', '/v1/problems/' + a, {}));
  }
  // A real round through the middleware: first, replay, mismatch.
  await report('charge:first', stripe.charges.create({ amount: 5000, currency: 'eur' }, { idempotencyKey: 'order-42' }));
  await report('charge:replay', stripe.charges.create({ amount: 5000, currency: 'eur' }, { idempotencyKey: 'order-42' }));
  await report('charge:mismatch', stripe.charges.create({ amount: 5001, currency: 'eur' }, { idempotencyKey: 'order-42' }));
  await report('charge:unknown-first', stripe.charges.create({ amount: 7000, currency: 'eur' }, { idempotencyKey: 'order-43' }));
  await report('charge:unknown-retry', stripe.charges.create({ amount: 7000, currency: 'eur' }, { idempotencyKey: 'order-43' }));
}

main().catch((e) => { console.error(e); process.exit(1); });
