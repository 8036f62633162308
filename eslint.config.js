// Lint: typescript-eslint's type-aware rules (floating promises, unsafe any), import circles, and
// the structure rules of docs/architecture.md, each scoped to where it applies.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import reactHooks from 'eslint-plugin-react-hooks';
import stylistic from '@stylistic/eslint-plugin';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/**
 * Every relative import of a file, imports of types only included (TypeScript's own reading of the
 * file, so commented-out imports are none), resolved to files that exist; read once per lint run.
 */
const importsOf = (() => {
  const seen = new Map();
  return (file) => {
    let out = seen.get(file);
    if (out) return out;
    out = [];
    seen.set(file, out);
    let text;
    try { text = fs.readFileSync(file, 'utf8'); } catch { return out; }
    for (const { fileName } of ts.preProcessFile(text, true, true).importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const target = path.resolve(path.dirname(file), fileName);
      if (fs.existsSync(target)) out.push(target);
    }
    return out;
  };
})();

/**
 * import-x/no-cycle does not follow imports of types only, so a circle of them (sip.ts and
 * sip-transfer.ts had one) passed it. This reports an import from which the importing file can be
 * reached again, whatever kind of import each step is.
 */
const noImportCircle = {
  meta: { type: 'problem', schema: [], messages: { circle: 'Import circle (imports of types included): {{route}}' } },
  create(context) {
    const self = context.physicalFilename;
    const check = (node) => {
      const spec = node.source?.value;
      if (typeof spec !== 'string' || !spec.startsWith('.')) return;
      const start = path.resolve(path.dirname(self), spec);
      if (!fs.existsSync(start)) return;
      const from = new Map([[start, null]]);
      const queue = [start];
      while (queue.length > 0) {
        const file = queue.shift();
        for (const next of importsOf(file)) {
          if (next === self) {
            const chain = [];
            for (let f = file; f !== null; f = from.get(f)) chain.unshift(f);
            const route = [self, ...chain, self].map((f) => path.relative(process.cwd(), f));
            context.report({ node, messageId: 'circle', data: { route: route.join(' → ') } });
            return;
          }
          if (!from.has(next)) { from.set(next, file); queue.push(next); }
        }
      }
    };
    return { ImportDeclaration: check, ExportAllDeclaration: check, ExportNamedDeclaration: check, ImportExpression: check };
  },
};

/** The layers of docs/architecture.md, top to bottom below the HTTP layer: each imports nothing of those above it. */
const ABOVE_ENGINES = ['./src/modules', './src/http', './src/app.ts', './src/platform.ts', './src/main.ts'];
const ENGINES = ['./src/queue', './src/sip', './src/media', './src/providers', './src/webhooks', './src/llm', './src/speech'];
const layering = {
  zones: [
    { target: './src/http', from: ['./src/modules', './src/app.ts', './src/platform.ts', './src/main.ts'],
      message: 'The HTTP layer imports no module: take what it needs as a dependency (docs/architecture.md).' },
    { target: ENGINES, from: ABOVE_ENGINES, message: 'Engines know no tenant, module or route (docs/architecture.md).' },
    { target: './src/db', from: [...ABOVE_ENGINES, ...ENGINES], message: 'Storage imports nothing above it (docs/architecture.md).' },
    { target: ['./src/lib', './src/config.ts'], from: [...ABOVE_ENGINES, ...ENGINES, './src/db'],
      message: 'The basics import nothing above them (docs/architecture.md).' },
  ],
};

/**
 * The order of the modules under src/modules/, from the bottom up (docs/architecture.md, "The order
 * of modules"): each may import only the modules before it in this list. A new module takes its
 * place here; so does one split out of another.
 */
const MODULE_ORDER = [
  'members', 'accounts', 'tokens', 'context', 'knowledge', 'models', 'limits', 'numbering-providers', 'integrations', 'phone-numbers',
  'webhooks', 'sip', 'agents', 'compliance', 'tasks', 'billing', 'speech-providers', 'conversations', 'agent-tests', 'voice', 'twilio', 'adr', 'overview', 'tenancy', 'console', 'ops',
];

// Every module folder has its place in the order, and every name in it is a folder.
const moduleFolders = fs.readdirSync(path.join(import.meta.dirname, 'src/modules'), { withFileTypes: true })
  .filter((e) => e.isDirectory()).map((e) => e.name);
const unplaced = moduleFolders.filter((m) => !MODULE_ORDER.includes(m));
const gone = MODULE_ORDER.filter((m) => !moduleFolders.includes(m));
if (unplaced.length > 0 || gone.length > 0) {
  throw new Error(`eslint.config.js: MODULE_ORDER must name every folder of src/modules once (not in it: ${unplaced.join(', ') || 'none'}; no such folder: ${gone.join(', ') || 'none'})`);
}

const moduleDir = (name) => `./src/modules/${name}`;
const moduleOrder = {
  zones: MODULE_ORDER.flatMap((name, i) => MODULE_ORDER.slice(i + 1).map((above) => ({
    target: moduleDir(name),
    from: moduleDir(above),
    message: `modules/${name} imports only the modules below it (MODULE_ORDER in eslint.config.js; docs/architecture.md, "The order of modules").`,
  }))),
};

/** The web console is a browser app apart: of this repository it imports only the typed client (sdk/). */
const consoleApart = {
  zones: [{
    target: './console',
    from: ['./src', './test', './bench', './scripts', './bin'],
    message: 'The console imports nothing of the service: only the typed client of sdk/ (docs/architecture.md, docs/console.md).',
  }],
};

/** SQL is written only in repositories, migrations, src/db and the generic queue engine. */
const SQL_HOMES = ['src/**/repository.ts', 'src/db/**', 'src/queue/engine.ts'];

const noSqlOutsideRepositories = {
  selector: [
    'CallExpression[callee.property.name=/^(selectFrom|insertInto|updateTable|deleteFrom|replaceInto|mergeInto)$/]',
    "TaggedTemplateExpression[tag.name='sql']",
  ].join(', '),
  message: 'SQL belongs in the module\'s repository (docs/architecture.md).',
};
const noDialectChecks = {
  selector: "MemberExpression[property.name='dialect']",
  message: 'Services never ask which engine they run on: put the difference in src/db or a repository.',
};
const noFallbackConstruction = {
  selector: "LogicalExpression[operator='??'] > NewExpression.right",
  message: 'Build services and runtimes once, in src/platform.ts; do not fall back to a new one.',
};

/**
 * The code's format, as it already is (docs/architecture.md, "Checked by lint"): lint fails on a
 * line written otherwise. Not a reformatter's choices: each rule here held for the whole tree when
 * it was added, bar a few stragglers fixed then. Line length is not limited (lines run from short
 * to a few hundred characters where a table row or a message reads better whole), and neither is
 * where a broken expression's operator goes (both are used).
 */
const format = {
  '@stylistic/indent': ['error', 2],
  '@stylistic/quotes': ['error', 'single', { avoidEscape: true, allowTemplateLiterals: 'always' }],
  '@stylistic/semi': ['error', 'always'],
  '@stylistic/comma-dangle': ['error', 'always-multiline'],
  '@stylistic/no-trailing-spaces': 'error',
  '@stylistic/eol-last': 'error',
  '@stylistic/linebreak-style': ['error', 'unix'],
  '@stylistic/no-tabs': 'error',
  '@stylistic/no-mixed-spaces-and-tabs': 'error',
  '@stylistic/no-multiple-empty-lines': ['error', { max: 1, maxEOF: 0, maxBOF: 0 }],
  '@stylistic/padded-blocks': ['error', 'never'],
  '@stylistic/brace-style': ['error', '1tbs', { allowSingleLine: true }],
  '@stylistic/block-spacing': 'error',
  '@stylistic/keyword-spacing': 'error',
  '@stylistic/space-before-blocks': 'error',
  '@stylistic/space-before-function-paren': ['error', { anonymous: 'always', named: 'never', asyncArrow: 'always' }],
  '@stylistic/function-call-spacing': 'error',
  '@stylistic/space-in-parens': ['error', 'never'],
  '@stylistic/space-infix-ops': 'error',
  '@stylistic/space-unary-ops': 'error',
  '@stylistic/no-multi-spaces': 'error',
  '@stylistic/comma-spacing': 'error',
  '@stylistic/comma-style': 'error',
  '@stylistic/key-spacing': 'error',
  '@stylistic/semi-spacing': 'error',
  '@stylistic/no-extra-semi': 'error',
  '@stylistic/object-curly-spacing': ['error', 'always'],
  '@stylistic/array-bracket-spacing': ['error', 'never'],
  '@stylistic/computed-property-spacing': 'error',
  '@stylistic/template-curly-spacing': 'error',
  '@stylistic/rest-spread-spacing': 'error',
  '@stylistic/arrow-spacing': 'error',
  '@stylistic/arrow-parens': ['error', 'always'],
  '@stylistic/switch-colon-spacing': 'error',
  '@stylistic/dot-location': ['error', 'property'],
  '@stylistic/no-whitespace-before-property': 'error',
  '@stylistic/new-parens': 'error',
  '@stylistic/quote-props': ['error', 'as-needed'],
  '@stylistic/spaced-comment': ['error', 'always', { markers: ['/'] }],
  '@stylistic/generator-star-spacing': ['error', { before: false, after: true, method: { before: true, after: false } }],
  '@stylistic/yield-star-spacing': 'error',
  '@stylistic/member-delimiter-style': 'error',
  '@stylistic/type-annotation-spacing': 'error',
  '@stylistic/jsx-quotes': ['error', 'prefer-double'],
  '@stylistic/jsx-curly-spacing': 'error',
  '@stylistic/jsx-equals-spacing': 'error',
  '@stylistic/jsx-tag-spacing': 'error',
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'data/**', 'test/fixtures/**', '.tmp/**',
    // The typed client's generated files (scripts/generate-sdk.ts; `npm run check:sdk` keeps them exact).
    'sdk/schema.d.ts', 'sdk/client.js', 'sdk/client.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      // bin/, scripts/ and this file are plain JavaScript outside tsconfig.json's projects.
      parserOptions: { projectService: { allowDefaultProject: ['bin/*.js', 'scripts/*.mjs', 'eslint.config.js'] }, tsconfigRootDir: import.meta.dirname },
    },
    plugins: { 'import-x': importX, '@stylistic': stylistic, callplane: { rules: { 'no-import-circle': noImportCircle } } },
    // import-x reads the imported files too (to follow circles through them): with the TypeScript parser.
    settings: { 'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] }, 'import-x/extensions': ['.ts', '.js', '.mjs'] },
    rules: {
      ...format,
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      'callplane/no-import-circle': 'error',
      // Imports of types count too (import-x/no-cycle does not follow them).
      'import-x/no-restricted-paths': ['error', { zones: [...layering.zones, ...moduleOrder.zones, ...consoleApart.zones] }],
      // node:test's describe/it/test return promises the runner itself awaits.
      '@typescript-eslint/no-floating-promises': ['error', {
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }],
      }],
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: { arguments: false, attributes: false } }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/only-throw-error': 'error',
      // Route handlers, hooks and interface implementations are async by contract whether or not
      // they await; no-floating-promises and no-misused-promises catch the mistakes that matter.
      '@typescript-eslint/require-await': 'off',
      // It calls an assertion from Kysely<any> rows to their real shape unnecessary, and its fix
      // then leaves the value untyped: the assertions stay.
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      'no-empty': ['error', { allowEmptyCatch: true }],
    },
  },
  {
    files: ['src/**/*.ts'],
    ignores: SQL_HOMES,
    rules: { 'no-restricted-syntax': ['error', noSqlOutsideRepositories, noDialectChecks, noFallbackConstruction] },
  },
  {
    // The composition root builds each piece after what it needs: nothing is used before it is
    // declared, not even inside a closure that runs later (docs/architecture.md, "Construction").
    files: ['src/platform.ts'],
    rules: { '@typescript-eslint/no-use-before-define': ['error', { functions: true, classes: true, variables: true, allowNamedExports: false }] },
  },
  {
    files: SQL_HOMES.filter((p) => p !== 'src/db/**'),
    rules: { 'no-restricted-syntax': ['error', noFallbackConstruction] },
  },
  {
    // The console's React: the rules of hooks and the React Compiler's checks (eslint-plugin-react-hooks'
    // recommended set), with a hook's missing dependency an error too, not a warning lint passes with.
    files: ['console/**/*.ts', 'console/**/*.tsx'],
    ...reactHooks.configs.flat.recommended,
    rules: { ...reactHooks.configs.flat.recommended.rules, 'react-hooks/exhaustive-deps': 'error' },
  },
  {
    // Tests and benchmarks read what the service wrote (rows, JSON answers) as any on purpose.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      parserOptions: { projectService: false },
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly' },
    },
  },
);
