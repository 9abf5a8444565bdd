// Record sample_traces/vercel_ai_rag.jsonl: a small RAG app on the Vercel AI SDK, traced only
// by the SDK's own telemetry (the `ai.*` attributes of @ai-sdk/otel's LegacyOpenTelemetry).
// With `--integration genai`, the same app through @ai-sdk/otel's default integration (OTel
// GenAI spans: chat, execute_tool, invoke_agent) into vercel_ai/genai_rag.jsonl and
// vercel_ai/expected_genai.json.
//
// Two shapes of app, both common:
//   "context": the app retrieves policies itself, cuts them to a character budget, numbers
//     them into the prompt (system or user message) and calls generateText or streamText.
//     The SDK traces no retrieval, so the app records its own retrieval span with the OTel
//     GenAI attributes (gen_ai.operation.name = retrieval, gen_ai.retrieval.documents).
//   "tool": retrieval is a tool; the model calls it, then answers from the tool result in a
//     second step, citing documents by their place in the result ([2]).
//
// The model is the `ai` package's own mock model, scripted to act like a real one: it reads
// the prompt it is given, answers from the decisive policy where it finds it, cites it, and
// reports prompt tokens. No network is used.
//
// Each request's trace is one line of OTLP/JSON (the OTLP/HTTP JSON encoding, by the
// OpenTelemetry JS serializer). Trace and span ids come from a fixed seed and times are moved
// to a fixed hour, so a rerun differs only in span durations. Beside the traces it writes
// expected.json: what the app did in each request (retrieved, put in the prompt, cut, cited),
// which the Python tests compare the collector's reading against.
//
//     cd sample_traces/vercel_ai && npm ci && node record.mjs

import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { LegacyOpenTelemetry, OpenTelemetry } from '@ai-sdk/otel';
import { context, trace } from '@opentelemetry/api';
import { JsonTraceSerializer } from '@opentelemetry/otlp-transformer';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { generateText, registerTelemetry, stepCountIs, streamText, tool } from 'ai';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import { z } from 'zod';

const HERE = dirname(fileURLToPath(import.meta.url));
// `--integration genai` records the same app through @ai-sdk/otel's default integration,
// which sends OTel GenAI spans (chat, execute_tool, invoke_agent) instead of `ai.*` ones.
const ARGS = process.argv.slice(2);
const GENAI = ARGS.includes('--integration') && ARGS[ARGS.indexOf('--integration') + 1] === 'genai';
const PATHS = ARGS.filter((a, i) => a !== '--integration' && ARGS[i - 1] !== '--integration');
const OUT = PATHS[0] ?? (GENAI ? join(HERE, 'genai_rag.jsonl') : join(HERE, '..', 'vercel_ai_rag.jsonl'));
const EXPECTED = PATHS[1] ?? join(HERE, GENAI ? 'expected_genai.json' : 'expected.json');
const SERVICE = 'policy-bot';
const MODEL = 'gpt-4.1-mini';
// the other framework samples' last week: 2026-11-20, after their hours (10:00 to 13:00)
const ANCHOR_NS = BigInt(Date.UTC(2026, 10, 20, 14, 0, 0)) * 1_000_000n;
const CHARS_PER_TOKEN = 3.7; // what the scripted model reports as prompt tokens
const RETRIEVE_K = 5;

// --- the knowledge base and a keyword retriever ----------------------------------------------

const POLICIES = [
  ['returns', 'Returns', 'Customers may return unused items within 14 days of delivery for a full refund. Items must be in their original packaging.'],
  ['returns-2019', 'Returns (2019, deprecated)', 'Customers may return items within 30 days of purchase. This returns policy was replaced in 2021 and applies only to orders placed before then.'],
  ['refund-timing', 'Refund timing', 'Refunds are issued to the original payment method within 5 business days after the returned item is received at our warehouse.'],
  ['exchanges', 'Exchanges', 'Exchanges for a different size or colour are free within 14 days of delivery, subject to stock. We pay the return shipping on exchanges.'],
  ['shipping', 'Shipping', 'Standard shipping takes 3 to 5 business days. Express shipping takes 1 business day when the order is placed before noon.'],
  ['shipping-costs', 'Shipping costs', 'Standard shipping is free for orders over 50 euros, otherwise it costs 4.95 euros. Return shipping labels cost 3 euros, except for exchanges.'],
  ['damaged', 'Damaged items', 'Report items that arrive damaged within 48 hours of delivery with a photo. We send a replacement or refund the item at no cost.'],
  ['final-sale', 'Final sale', 'Items marked final sale cannot be returned or exchanged for a refund, except when they arrive damaged.'],
  ['gift-cards', 'Gift cards', 'Gift cards are valid for three years from purchase and cannot be returned or exchanged for cash.'],
  ['warranty', 'Warranty', 'Electronics carry a two-year warranty that covers manufacturing defects, not accidental damage. Warranty claims are not returns.'],
].map(([id, title, text]) => ({ id, title, source: `policies/${id}.md`, text }));
const BY_ID = Object.fromEntries(POLICIES.map(p => [p.id, p]));

const STOP = new Set(['the', 'and', 'for', 'can', 'how', 'does', 'many', 'long', 'are', 'not', 'what', 'who', 'when', 'get', 'you', 'have', 'item', 'items']);
const words = text => new Set((text.toLowerCase().match(/[a-z0-9]+/g) ?? []).filter(w => w.length > 2 && !STOP.has(w)));

/** The best RETRIEVE_K policies for a query: {id, score}, score the share of query words. */
export function retrieve(query) {
  const q = words(query);
  return POLICIES
    .map((p, i) => ({ p, i, score: Math.round(([...q].filter(w => words(p.title + ' ' + p.text).has(w)).length / Math.max(q.size, 1)) * 1e4) / 1e4 }))
    .filter(r => r.score > 0)
    .sort((a, b) => b.score - a.score || a.i - b.i)
    .slice(0, RETRIEVE_K)
    .map(r => ({ id: r.p.id, score: r.score }));
}

// --- the cases ------------------------------------------------------------------------------

// decisive: the policy that answers; claim: what the model says from it. fallback/wrong: the
// policy and claim it falls back on when the decisive one is not in its prompt.
const CASES = [
  { shape: 'context', where: 'system', budget: 1000, order: 'score', question: 'Is the 30 day return window still valid?', decisive: 'returns-2019', claim: 'No, the 30-day window was replaced in 2021 and applies only to orders placed before then' },
  { shape: 'context', where: 'user', budget: 1000, order: 'reverse', question: 'When will my refund reach my original payment method?', decisive: 'refund-timing', claim: 'Refunds reach your original payment method within 5 business days after we receive the item' },
  { shape: 'context', where: 'system', budget: 280, order: 'reverse', stream: true, question: 'Can I return a damaged final sale item?', decisive: 'final-sale', claim: 'Yes: final sale items can be returned when they arrive damaged' },
  { shape: 'context', where: 'user', budget: 300, order: 'score', question: 'Do you refund return shipping costs for an exchange?', decisive: 'exchanges', claim: 'Yes, we pay the return shipping on exchanges', fallback: 'shipping-costs', wrong: 'No, return shipping labels cost 3 euros' },
  { shape: 'context', where: 'system', budget: 1000, order: 'reverse', stream: true, question: 'Do damaged items get refunded at no cost?', decisive: 'damaged', claim: 'Yes: report it within 48 hours with a photo and we replace or refund it at no cost' },
  { shape: 'tool', k: 4, question: 'How long does standard delivery take?', decisive: 'shipping', claim: 'Standard shipping takes 3 to 5 business days' },
  { shape: 'tool', k: 5, question: 'Do you refund return shipping costs for an exchange?', decisive: 'exchanges', claim: 'Yes, we pay the return shipping on exchanges' },
  { shape: 'tool', k: 5, question: 'Can I get a refund on final sale shoes?', decisive: 'final-sale', claim: 'No, final sale items cannot be returned unless they arrive damaged' },
  { shape: 'tool', k: 5, question: 'Can I return a gift card for a refund?', decisive: 'gift-cards', claim: 'No, gift cards cannot be returned' },
  { shape: 'tool', k: 3, question: 'When is express shipping delivered if I order in the morning?', decisive: 'shipping', claim: 'Express shipping arrives in 1 business day when you order before noon' },
];

// --- the app --------------------------------------------------------------------------------

const label = (n, p) => `[${n}] ${p.title}: ${p.text}`;

/** The policies that fit the context budget (characters of their labelled lines), in rank
 * order; the first that does not fit ends the block. */
function fitBudget(ranked, budget) {
  const kept = [];
  let used = 0;
  for (const r of ranked) {
    const size = label(kept.length + 1, BY_ID[r.id]).length + 1;
    if (used + size > budget) break;
    kept.push(r);
    used += size;
  }
  return kept;
}

const SYSTEM = 'You are the support assistant of an online shop. Answer from the numbered policies only and cite the policy you used by its number, like [2].';
const TOOL_SYSTEM = 'You are the support assistant of an online shop. Search the policies with the search_policies tool, answer from what it returns and cite a policy by its place in the results, like [2].';

/** Text of a prompt message as the scripted model reads it. */
function messageText(m) {
  if (typeof m.content === 'string') return m.content;
  return m.content.map(part => part.type === 'text' ? part.text
    : part.type === 'tool-result' ? JSON.stringify(part.output.value) : '').join('\n');
}

/** The scripted model: answers from the decisive policy's numbered line, or its place in a
 * tool result, else from the fallback policy. It notes what it cited and the prompt tokens
 * it reported for each call in `seen`. */
function scriptedModel(c, seen) {
  const usage = prompt => {
    const total = Math.round(prompt.map(messageText).join('\n').length / CHARS_PER_TOKEN);
    seen.promptTokens.push(total);
    return {
      inputTokens: { total, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 24, text: 24, reasoning: undefined },
    };
  };
  const answer = prompt => {
    const toolResult = prompt.flatMap(m => m.role === 'tool' ? m.content : []).find(p => p.type === 'tool-result');
    if (c.shape === 'tool' && !toolResult) {
      return { content: [{ type: 'tool-call', toolCallId: `call_${c.index}`, toolName: 'search_policies', input: JSON.stringify({ query: c.question }) }], finish: 'tool-calls' };
    }
    let slot = null;
    let claim = c.claim;
    let id = c.decisive;
    for (const [target, said] of [[c.decisive, c.claim], [c.fallback, c.wrong]]) {
      if (!target) continue;
      if (toolResult) {
        const pos = toolResult.output.value.findIndex(d => d.id === target);
        if (pos >= 0) slot = pos + 1;
      } else {
        const text = prompt.map(messageText).join('\n');
        const m = text.match(new RegExp(`\\[(\\d+)\\] ${BY_ID[target].title.replace(/[()]/g, '\\$&')}: `));
        if (m) slot = Number(m[1]);
      }
      if (slot !== null) { claim = said; id = target; break; }
    }
    if (slot !== null) seen.cited.push(id);
    return { content: [{ type: 'text', text: slot === null ? 'I could not find this in the policies.' : `${claim} [${slot}].` }], finish: 'stop' };
  };
  let calls = 0;
  const metadata = () => ({ id: `resp_${c.index}_${++calls}`, timestamp: new Date(Number(ANCHOR_NS / 1_000_000n)), modelId: MODEL });
  return new MockLanguageModelV4({
    provider: 'openai.chat',
    modelId: MODEL,
    doGenerate: async ({ prompt }) => {
      const { content, finish } = answer(prompt);
      return { content, finishReason: { unified: finish, raw: finish }, usage: usage(prompt), warnings: [], response: metadata() };
    },
    doStream: async ({ prompt }) => {
      const { content, finish } = answer(prompt);
      const text = content[0].text;
      const pieces = text.match(/.{1,16}/gs);
      return {
        stream: convertArrayToReadableStream([
          { type: 'stream-start', warnings: [] },
          { type: 'response-metadata', ...metadata() },
          { type: 'text-start', id: 't0' },
          ...pieces.map(delta => ({ type: 'text-delta', id: 't0', delta })),
          { type: 'text-end', id: 't0' },
          { type: 'finish', finishReason: { unified: finish, raw: finish }, usage: usage(prompt) },
        ]),
      };
    },
  });
}

/** One request of the "context" shape; what the app did. */
async function askWithContext(tracer, c) {
  return tracer.startActiveSpan('rag.request', async root => {
    const retrieved = await tracer.startActiveSpan('retrieve', async span => {
      const found = retrieve(c.question);
      span.setAttributes({
        'gen_ai.operation.name': 'retrieval',
        'gen_ai.retrieval.query.text': c.question,
        'gen_ai.retrieval.documents': JSON.stringify(found.map(r => ({ id: r.id, score: r.score, content: BY_ID[r.id].text, metadata: { source: BY_ID[r.id].source } }))),
      });
      span.end();
      return found;
    });
    const kept = fitBudget(retrieved, c.budget);
    const packed = c.order === 'reverse' ? [...kept].reverse() : kept;
    const block = packed.map((r, i) => label(i + 1, BY_ID[r.id])).join('\n');
    const seen = { cited: [], promptTokens: [] };
    const model = scriptedModel(c, seen);
    const messages = c.where === 'system'
      ? { system: `${SYSTEM}\n\nPolicies:\n${block}`, prompt: c.question }
      : { system: SYSTEM, prompt: `Policies:\n${block}\n\nQuestion: ${c.question}` };
    const options = { model, ...messages, telemetry: { functionId: 'policy-answer' } };
    let answer;
    if (c.stream) {
      const result = streamText(options);
      answer = await result.text;
    } else {
      answer = (await generateText(options)).text;
    }
    root.end();
    return { retrieved, in_prompt: packed.map(r => r.id), answer, seen };
  });
}

/** One request of the "tool" shape; what the app did. */
async function askWithTool(c) {
  const results = [];
  const seen = { cited: [], promptTokens: [] };
  const searchPolicies = tool({
    description: 'Search the shop policies; returns the best matching policies, best first.',
    inputSchema: z.object({ query: z.string() }),
    execute: async ({ query }) => {
      const found = retrieve(query).slice(0, c.k);
      results.push(found);
      return found.map(r => ({ id: r.id, title: BY_ID[r.id].title, score: r.score, content: BY_ID[r.id].text }));
    },
  });
  const { text } = await generateText({
    model: scriptedModel(c, seen),
    system: TOOL_SYSTEM,
    prompt: c.question,
    tools: { search_policies: searchPolicies },
    stopWhen: stepCountIs(3),
    telemetry: { functionId: 'policy-agent' },
  });
  const [found] = results;
  return { retrieved: found, in_prompt: found.map(r => r.id), answer: text, seen };
}

// --- tracing and output ---------------------------------------------------------------------

/** Trace and span ids from a counter, hashed: the same run gives the same ids. */
class SeededIds {
  n = 0;
  next(chars) { return createHash('sha256').update(`vercel-ai-rag/${++this.n}`).digest('hex').slice(0, chars); }
  generateTraceId() { return this.next(32); }
  generateSpanId() { return this.next(16); }
}

/** Each export line with every span (and event) moved by one offset: the first span of the
 * file starts at ANCHOR_NS. */
function anchored(lines) {
  const spans = lines.flatMap(doc => doc.resourceSpans.flatMap(rs => rs.scopeSpans.flatMap(ss => ss.spans)));
  const delta = ANCHOR_NS - spans.map(s => BigInt(s.startTimeUnixNano)).reduce((a, b) => a < b ? a : b);
  for (const s of spans) {
    s.startTimeUnixNano = String(BigInt(s.startTimeUnixNano) + delta);
    s.endTimeUnixNano = String(BigInt(s.endTimeUnixNano) + delta);
    for (const e of s.events ?? []) e.timeUnixNano = String(BigInt(e.timeUnixNano) + delta);
  }
  return lines;
}

async function main() {
  const exporter = new InMemorySpanExporter();
  const provider = new NodeTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ 'service.name': SERVICE })),
    idGenerator: new SeededIds(),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  provider.register();
  const tracer = trace.getTracer('policy-bot');
  const Integration = GENAI ? OpenTelemetry : LegacyOpenTelemetry;
  registerTelemetry(new Integration({ tracer: provider.getTracer('ai') }));

  const lines = [];
  const expected = [];
  for (const [index, c] of CASES.entries()) {
    const done = c.shape === 'tool'
      ? await context.with(context.active(), () => askWithTool({ ...c, index }))
      : await askWithContext(tracer, { ...c, index });
    await provider.forceFlush();
    const spans = exporter.getFinishedSpans();
    exporter.reset();
    lines.push(JSON.parse(new TextDecoder().decode(JsonTraceSerializer.serializeRequest(spans))));
    const traceIds = new Set(spans.map(s => s.spanContext().traceId));
    if (traceIds.size !== 1) throw new Error(`case ${index}: ${traceIds.size} traces`);
    const { retrieved, in_prompt: inPrompt, answer, seen } = done;
    expected.push({
      trace_id: [...traceIds][0],
      shape: c.shape,
      api: c.stream ? 'streamText' : 'generateText',
      question: c.question,
      model: MODEL,
      retrieved: retrieved.map(r => r.id),
      scores: retrieved.map(r => r.score),
      in_prompt: inPrompt,
      dropped: retrieved.map(r => r.id).filter(id => !inPrompt.includes(id)),
      decisive: c.decisive,
      cited: seen.cited,
      answer,
      // what the model reported for the call that answered (the last one)
      prompt_tokens: seen.promptTokens.at(-1),
      // the app's retrieval span names each policy's source; the tool result does not
      source: Object.fromEntries(retrieved.map(r => [r.id, c.shape === 'context' ? BY_ID[r.id].source : null])),
      text: Object.fromEntries(retrieved.map(r => [r.id, BY_ID[r.id].text])),
    });
  }
  await provider.shutdown();
  writeFileSync(OUT, anchored(lines).map(doc => JSON.stringify(doc) + '\n').join(''));
  writeFileSync(EXPECTED, JSON.stringify({ service: SERVICE, chars_per_token: CHARS_PER_TOKEN, requests: expected }, null, 2) + '\n');
  console.log(`wrote ${lines.length} requests to ${OUT} and what the app did to ${EXPECTED}`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
