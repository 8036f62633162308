// The agent fields' check (src/modules/agents/validation.ts): each field's TypeBox schema compiled
// on first use with our string formats (src/http/formats.ts), a refusal told as one sentence naming
// the field, and the small steps after the schema (normalising, rules across a value's parts).
// Over HTTP, test/modules/agents.test.ts and the suites of each field's feature check the same.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import ajvCompiler from '@fastify/ajv-compiler';
import { FormatRegistry, Type } from '@sinclair/typebox';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { ajvFormats, FORMATS } from '../../src/http/formats.ts';
import { DEFAULT_SETTINGS, resolveAgentSettings } from '../../src/modules/agents/settings.ts';
import { checkConfig, checkVoiceChoice, defaultConfig } from '../../src/modules/agents/validation.ts';
import { voiceSettings } from '../../src/modules/agents/voice-settings.ts';

const refusal = (input: unknown, root?: string): string => {
  try {
    checkConfig(input, root);
  } catch (err) {
    return (err as Error).message;
  }
  assert.fail(`${JSON.stringify(input)} was accepted`);
};

const url = 'https://a.example/hook';
const action = { name: 'lookup', description: 'Looks up an order', url };

describe('agent fields', () => {
  it('nothing is compiled (and no format registered) until the first value is checked', () => {
    // Loading the module and resolving the defaults (as the service does at start) checks nothing.
    assert.equal(DEFAULT_SETTINGS.agentLang, 'en-US');
    assert.equal(FormatRegistry.Has('http-url'), false);
    checkConfig({ links: [url] });
    for (const name of Object.keys(FORMATS)) assert.equal(FormatRegistry.Has(name), true, name);
  });

  it('a refusal names the field (under the root given) and says what is wrong, in the words of the field\'s schema, its format or its kind', () => {
    const cases: [unknown, string][] = [
      [{ agentLang: 'xx_1' }, 'agentLang must be a BCP-47 language tag (such as en-US) or multi, not "xx_1"'],
      [{ timezone: 'Mars/Olympus' }, 'timezone must be an IANA time zone (such as America/Chicago), not "Mars/Olympus"'],
      [{ timezone: '' }, 'timezone must not be empty'],
      [{ speakingTimeout: 50 }, 'speakingTimeout must be between 100 and 10000'],
      [{ speakingTimeout: 500.5 }, 'speakingTimeout must be an integer'],
      [{ waitOnAnswer: '100' }, 'waitOnAnswer must be an integer'],
      [{ waitOnAnswer: null }, 'waitOnAnswer must not be null'],
      [{ noConvoHistory: 'true' }, 'noConvoHistory must be a boolean'],
      [{ agentVoice: 'robot voice!' }, 'agentVoice must be a catalog voice (en-US Female, en-US Male, en-GB Female, en-GB Male, es-US Female, es-US Male, es-MX Female, es-ES Female, fr-FR Female, de-DE Female) or an engine\'s voice id'],
      [{ agentTtsEngine: 'polly' }, 'agentTtsEngine must be one of: espeak, openai, elevenlabs, cartesia, deepgram'],
      [{ agentTtsEngine: 3 }, 'agentTtsEngine must be a string'],
      [{ agentVoice: 7 }, 'agentVoice must be a string'],
      [{ agentThinking: 'high' }, 'agentThinking must be one of: low'],
      [{ links: ['ftp://a.example/x'] }, 'links[0] must be an http(s) URL'],
      [{ links: Array(51).fill(url) }, 'links must have at most 50 items'],
      [{ cnamAutoRejectRegex: '(a+)+$' }, 'cnamAutoRejectRegex could backtrack catastrophically (nested or overlapping repetition); simplify it'],
      [{ cnamAutoTransferRegex: '([' }, 'cnamAutoTransferRegex is not a valid regular expression: Invalid regular expression: /([/: Unterminated character class'],
      [{ cnamAutoTransferDestination: '555' }, 'cnamAutoTransferDestination must be an E.164 number (+15551234567) or ext:/pbx: followed by an extension'],
      [{ postAnswerDtmf: '12x' }, 'postAnswerDtmf may hold only 0-9 * # A-D w ,'],
      [{ apps: [{ appId: 'a', version: 'v1', instructions: 'x', extra: 1 }] }, 'apps[0].extra is not allowed'],
      [{ apps: [{ appId: 'a', version: 'v1' }] }, 'apps[0].instructions is required'],
      [{ backgroundAudio: { url, gain: 99 } }, 'backgroundAudio.gain must be between -40 and 20'],
      [{ backgroundAudio: 3 }, 'backgroundAudio must be a URL or an object with url'],
      [{ backgroundAudio: { loop: true } }, 'backgroundAudio.url is required'],
      [{ postCallAnalysis: 101 }, 'postCallAnalysis must be true, false or a whole percentage from 0 to 100'],
      [{ postCallAnalysis: 12.5 }, 'postCallAnalysis must be true, false or a whole percentage from 0 to 100'],
      [{ analysisFields: { when: 'date' } }, 'analysisFields.when must be one of: string, number, boolean, enum'],
      [{ analysisFields: { '1st': 'string' } }, 'analysisFields.1st must be a name of letters, digits and _ starting with a letter (at most 40)'],
      [{ analysisFields: Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`f${i}`, 'string'])) }, 'analysisFields may have at most 10 fields'],
      [{ analysisFields: ['string'] }, 'analysisFields must be an object of named fields'],
      [{ analysisOutcomes: ['Bad'] }, 'analysisOutcomes[0] must start with a letter and hold only a-z, 0-9 and - (at most 40)'],
      [{ analysisOutcomes: [3] }, 'analysisOutcomes[0] must be a name or an object with name and description'],
      [{ webhookActions: [{ ...action, url: 'ftp://x' }] }, 'webhookActions[0].url must be an http(s) URL'],
      [{ webhookActions: [{ ...action, parameters: { '1n': { type: 'number' } } }] }, 'webhookActions[0].parameters.1n must be a name of letters, digits and _'],
      [{ webhookActions: [{ ...action, parameters: { n: 'string' } }] }, 'webhookActions[0].parameters.n must be an object with type'],
      [{ transferDestinations: [{ name: 'desk', destination: 'x' }] }, 'transferDestinations[0].destination must be an E.164 number (+15551234567) or ext:/pbx: followed by an extension'],
      [{ knowledgeBases: ['doc_1'] }, 'knowledgeBases[0] must be a knowledge base id (kb_…), not "doc_1"'],
      [{ knowledgeBases: ['kb_1', 7] }, 'knowledgeBases[1] must be a string'],
      [{ bogus: 1 }, 'bogus is not an agent field'],
    ];
    for (const [input, message] of cases) {
      assert.equal(refusal(input), message);
      assert.equal(refusal(input, 'snapshot.'), `snapshot.${message}`);
    }
    assert.equal(refusal([1]), 'body must be an object');
  });

  it('rules across a value\'s parts are checked after its schema', () => {
    assert.equal(refusal({ webhookActions: [{ ...action, name: 'send_text' }] }), 'webhookActions[0].name \'send_text\' is a built-in tool\'s name');
    assert.equal(refusal({ webhookActions: [{ ...action, timeoutSeconds: 31 }] }), 'webhookActions[0].timeoutSeconds must be between 1 and 30');
    assert.equal(refusal({ webhookActions: [{ ...action, async: true, timeoutSeconds: 601 }] }), 'webhookActions[0].timeoutSeconds must be between 1 and 600');
    assert.equal(refusal({ webhookActions: [{ ...action, parameters: { n: { type: 'number', enum: ['1'] } } }] }), 'webhookActions[0].parameters.n.enum applies only to string parameters');
    assert.equal(refusal({ webhookActions: [action, action] }), 'webhookActions names the action \'lookup\' twice');
    assert.equal(refusal({ transferDestinations: [{ name: 'a', destination: 'ext:1' }, { name: 'a', destination: 'ext:2' }] }), 'transferDestinations names the destination \'a\' twice');
    assert.equal(refusal({ analysisOutcomes: ['resolved'] }), 'analysisOutcomes[0] \'resolved\' is a built-in outcome');
    assert.equal(refusal({ analysisOutcomes: [{ name: 'resolved' }] }), 'analysisOutcomes[0].name \'resolved\' is a built-in outcome');
    assert.equal(refusal({ analysisOutcomes: ['paid', { name: 'paid' }] }), 'analysisOutcomes names the outcome \'paid\' twice');
    assert.equal(refusal({ analysisFields: { plan: { type: 'enum' } } }), 'analysisFields.plan.values is required for an enum');
    assert.equal(refusal({ analysisFields: { budget: { type: 'number', values: ['1'] } } }), 'analysisFields.budget.values applies only to enum fields');
  });

  it('what is stored is normalised: spellings, short forms, defaults, duplicates dropped', () => {
    assert.deepEqual(checkConfig({
      timezone: 'asia/tokyo', agentLang: 'es-mx', knowledgeBases: ['kb_1', 'kb_2', 'kb_1'],
      analysisOutcomes: ['booked', { name: 'paid', description: 'd' }],
      analysisFields: { budget: 'number', plan: { type: 'enum', values: ['a', 'b', 'a'] } },
      webhookActions: [action, { ...action, name: 'later', async: true }],
      agentThinking: null, attendedTransferBridgeTrigger: 'any',
    }), {
      timezone: 'Asia/Tokyo', agentLang: 'es-MX', knowledgeBases: ['kb_1', 'kb_2'],
      analysisOutcomes: [{ name: 'booked' }, { name: 'paid', description: 'd' }],
      analysisFields: { budget: { type: 'number' }, plan: { type: 'enum', values: ['a', 'b'] } },
      webhookActions: [
        { ...action, parameters: {}, async: false, timeoutSeconds: 10 },
        { ...action, name: 'later', parameters: {}, async: true, timeoutSeconds: 120 },
      ],
      agentThinking: null, attendedTransferBridgeTrigger: 'any',
    });
  });

  it('a stored value the field no longer takes reads as its default; an integer out of range is clamped', () => {
    const s = resolveAgentSettings({ agentLang: 'xx_1', timezone: 'europe/paris', speakingTimeout: 50, links: ['ftp://x'], agentThinking: 'high' } as Record<string, unknown>);
    assert.deepEqual([s.agentLang, s.timezone, s.speakingTimeout, s.links, s.agentThinking], ['en-US', 'Europe/Paris', 100, [], null]);
  });

  it('Ajv (the routes\' validators) and TypeBox\'s compiler agree on every format', () => {
    // Ajv as Fastify builds it for the routes, with the options src/app.ts gives it.
    const compile = ajvCompiler()({}, { customOptions: { allErrors: false, formats: ajvFormats } } as never) as unknown as (route: { schema: unknown }) => (v: unknown) => boolean;
    const samples = ['', 'https://a.example/x', 'ftp://a.example', 'America/Chicago', 'asia/tokyo', 'Mars/Olympus', 'en-US', 'multi', 'xx_1',
      '^SPAM', '(a+)+$', '([', '+15551234567', 'ext:1234', 'pbx:*9', '555', '12#w,', '12x', 'any'];
    for (const name of Object.keys(FORMATS)) {
      const schema = Type.String({ format: name });
      const typebox = TypeCompiler.Compile(schema);
      const validate = compile({ schema });
      for (const v of samples) assert.equal(validate(v), typebox.Check(v), `${name}: ${JSON.stringify(v)}`);
      assert.ok(samples.some((v) => typebox.Check(v)) && samples.some((v) => !typebox.Check(v)), `${name} both accepts and refuses a sample`);
    }
  });

  it('agentVoice and agentTtsEngine together: a catalog voice with any engine, an engine\'s own voice id only with that engine and in its form', () => {
    const voiceRefusal = (config: Record<string, unknown>): string | undefined => {
      try {
        checkVoiceChoice({ ...defaultConfig('a'), ...checkConfig(config) }, 'snapshot.');
      } catch (err) {
        return (err as Error).message;
      }
      return undefined;
    };
    for (const engine of ['espeak', 'openai', 'elevenlabs', 'cartesia', 'deepgram', null]) {
      assert.equal(voiceRefusal({ agentVoice: 'es-US Male', agentTtsEngine: engine }), undefined, String(engine));
    }
    assert.equal(voiceRefusal({ agentVoice: 'EXAVITQu4vr4xnSDxMaL', agentTtsEngine: 'elevenlabs' }), undefined);
    assert.equal(voiceRefusal({ agentVoice: 'f786b574-daa5-4673-aa0c-cbe3e8534c02', agentTtsEngine: 'cartesia' }), undefined);
    assert.equal(voiceRefusal({ agentVoice: 'aura-2-thalia-en', agentTtsEngine: 'deepgram' }), undefined);
    assert.equal(voiceRefusal({ agentVoice: 'nova', agentTtsEngine: 'openai' }), undefined);
    assert.equal(voiceRefusal({ agentVoice: 'm3', agentTtsEngine: 'espeak' }), undefined);
    assert.equal(voiceRefusal({ agentVoice: 'robot' }),
      'snapshot.agentVoice \'robot\' is not a catalog voice (en-US Female, en-US Male, en-GB Female, en-GB Male, es-US Female, es-US Male, es-MX Female, es-ES Female, fr-FR Female, de-DE Female); an engine\'s own voice id needs agentTtsEngine naming the engine');
    assert.equal(voiceRefusal({ agentVoice: 'aura-2-thalia-en', agentTtsEngine: 'elevenlabs' }),
      'snapshot.agentVoice \'aura-2-thalia-en\' is not a elevenlabs voice id (such as EXAVITQu4vr4xnSDxMaL), which agentTtsEngine elevenlabs needs');
    assert.equal(voiceRefusal({ agentVoice: 'EXAVITQu4vr4xnSDxMaL', agentTtsEngine: 'cartesia' }),
      'snapshot.agentVoice \'EXAVITQu4vr4xnSDxMaL\' is not a cartesia voice id (such as f786b574-daa5-4673-aa0c-cbe3e8534c02), which agentTtsEngine cartesia needs');
  });

  it('a call reads the engine and its own voice id; a catalog voice leaves the engine its default for the language and gender', () => {
    const own = voiceSettings({ agentVoice: 'EXAVITQu4vr4xnSDxMaL', agentTtsEngine: 'elevenlabs', agentLang: 'de-DE' });
    assert.deepEqual([own.ttsEngine, own.engineVoice, own.language, own.gender], ['elevenlabs', 'EXAVITQu4vr4xnSDxMaL', 'de-DE', 'female']);
    const catalog = voiceSettings({ agentVoice: 'en-GB Male', agentTtsEngine: 'cartesia' });
    assert.deepEqual([catalog.ttsEngine, catalog.engineVoice, catalog.gender], ['cartesia', undefined, 'male']);
    assert.equal(voiceSettings({}).ttsEngine, null);
    // A stored engine voice id without its engine (a configuration from before agentTtsEngine) is not used as one.
    assert.equal(voiceSettings({ agentVoice: 'EXAVITQu4vr4xnSDxMaL' }).engineVoice, undefined);
  });
});
