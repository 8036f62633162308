// Route schemas compiled on first use. Fastify compiles every route's validators (Ajv) and response
// serializers (fast-json-stringify) while it starts; with some 200 routes that was about 0.4 s of
// every start and 6–8 MB of an idle service's memory (the generated code and its closures), for
// routes most deployments never call. These compilers are Fastify's own, wrapped so each schema is
// compiled when its route first needs it (a few milliseconds, once) and kept. The compiler itself
// is built on first use too: Fastify asks for it while it starts, and building it creates an Ajv
// instance with its formats and the shared schemas checked against the meta-schema (about 0.1 s
// of every start, measured in issue 34). `compileAll()`
// compiles every schema still waiting, so a test (test/http/lazy-schemas.test.ts) finds a schema
// Ajv or fast-json-stringify refuses before a caller does.
import ajvCompiler from '@fastify/ajv-compiler';
import serializerCompiler from '@fastify/fast-json-stringify-compiler';

type ValidatorBuilder = ReturnType<typeof ajvCompiler>;
type SerializerBuilder = ReturnType<typeof serializerCompiler>;
type Validate = ((...args: unknown[]) => unknown) & { errors?: unknown; schemaEnv?: unknown };

export interface LazySchemas {
  compilersFactory: { buildValidator: ValidatorBuilder; buildSerializer: SerializerBuilder };
  /** Compiles every schema not compiled yet; answers how many it compiled. Throws the first refusal. */
  compileAll(): number;
}

export function lazySchemas(): LazySchemas {
  const waiting = new Set<() => unknown>();
  /** A thunk that compiles once, and leaves the waiting list when it has. */
  const once = <F>(compile: () => F): (() => F) => {
    let fn: F | undefined;
    const get = () => {
      if (fn === undefined) {
        fn = compile();
        waiting.delete(get);
      }
      return fn;
    };
    waiting.add(get);
    return get;
  };
  const validators = ajvCompiler();
  const serializers = serializerCompiler();
  const buildValidator = ((externalSchemas: unknown, options: unknown) => {
    let compiler: ((route: unknown) => Validate) | undefined;
    const compile = (route: unknown) => {
      compiler ??= (validators as (...a: unknown[]) => (route: unknown) => Validate)(externalSchemas, options);
      return compiler(route);
    };
    return (route: unknown) => {
      const real = once(() => compile(route));
      const validate: Validate = (...args) => {
        const fn = real();
        const result = fn(...args);
        // Fastify reads the errors off the function it called.
        validate.errors = fn.errors;
        return result;
      };
      // Fastify passes the parent object (so Ajv may coerce or default the root value) only to a
      // function with a schemaEnv, as Ajv's own have; the real one gets the same arguments.
      validate.schemaEnv = true;
      return validate;
    };
  }) as unknown as ValidatorBuilder;
  const buildSerializer = ((externalSchemas: unknown, options: unknown) => {
    let compiler: ((route: unknown) => (doc: unknown) => string) | undefined;
    const compile = (route: unknown) => {
      compiler ??= (serializers as (...a: unknown[]) => (route: unknown) => (doc: unknown) => string)(externalSchemas, options);
      return compiler(route);
    };
    return (route: unknown) => {
      const real = once(() => compile(route));
      return (doc: unknown) => real()(doc);
    };
  }) as unknown as SerializerBuilder;
  return {
    compilersFactory: { buildValidator, buildSerializer },
    compileAll() {
      let n = 0;
      for (const get of [...waiting]) {
        get();
        n++;
      }
      return n;
    },
  };
}
