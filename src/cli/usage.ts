// The help of the `callplane` command and its subcommands, and the error a wrong command line raises.

/** A command line that cannot run: printed with the command's usage, exit code 2. */
export class UsageError extends Error {
  constructor(message: string, readonly usage?: string) {
    super(message);
  }
}

/** The commands src/cli/commands.ts runs (help, the API's, doctor; its table is typed by these names): the service's own are serve, migrate and token. */
export const CLIENT_COMMANDS = ['tokens', 'tasks', 'agents', 'calls', 'doctor', 'help'] as const;
export type ClientCommandName = typeof CLIENT_COMMANDS[number];

/** Whether the command line is one of the commands src/cli/commands.ts runs (decided without loading them). */
export function isClientCommand(argv: string[]): boolean {
  if (argv.length === 1 && (argv[0] === '--help' || argv[0] === '-h')) return true;
  return argv[0] !== undefined && (CLIENT_COMMANDS as readonly string[]).includes(argv[0]);
}

/** Prints a command-line mistake (a UsageError, with the usage, or node's argument parser's) and answers its exit code, 2; undefined for any other error. */
export function reportUsageError(err: unknown): number | undefined {
  if (err instanceof UsageError || (err as NodeJS.ErrnoException | undefined)?.code?.startsWith('ERR_PARSE_ARGS_')) {
    console.error(`callplane: ${(err as Error).message}`);
    if (err instanceof UsageError && err.usage) console.error(`\n${err.usage}`);
    return 2;
  }
  return undefined;
}

const API = `  --url URL         the service, e.g. http://localhost:8080 (or CALLPLANE_URL)
  --token-file FILE a file holding the API token to act as (or CALLPLANE_TOKEN_FILE; or the token
                    itself in CALLPLANE_TOKEN)
  --token TOKEN     the token on the command line: warned against, since other users of the
                    machine can read it in the process list`;

export const HELP: Record<string, string> = {
  main: `usage: callplane <command> [options]

Service:
  serve [--role api|worker|all]   run the API and/or the workers (the default command)
  migrate                         apply the database migrations and exit
  token                           say where the bootstrap admin token is (creates the partner on a new database)
  doctor                          check configuration, database, carriers, SIP, speech engines and model

Through the API (--url or CALLPLANE_URL; the token in CALLPLANE_TOKEN or a file, --token-file):
  tokens create|list|revoke       an account's API tokens
  tasks import FILE.csv           queue tasks from a CSV file, with progress and the per-row report
  agents publish AGENT_ID         publish an agent's staging configuration to live
  agents test AGENT_ID            run an agent's test suites; exit 0 when every scenario passed
  calls watch                     live calls and their latest transcript lines, until Ctrl-C

\`callplane <command> --help\` says more about each.`,
  serve: `usage: callplane [serve] [--role api|worker|all]

Runs the API (--role api), the workers (--role worker) or both (--role all, the default).
The environment configures it (docs/configuration.md).`,
  migrate: `usage: callplane migrate

Applies the database migrations (DATABASE_URL, else DATA_DIR/callplane.db) and exits.`,
  token: `usage: callplane token

Says where the bootstrap admin token is (DATA_DIR/admin-token), creating the partner account and its
token on a new database. Tokens of any account: \`callplane tokens\`.`,
  tokens: `usage: callplane tokens create --description TEXT [--account ID]
       callplane tokens list [--account ID]
       callplane tokens revoke TOKEN_OR_PREFIX [--account ID]

An account's API tokens, through the API. --account acts on a descendant account (targetAccountId).
create prints the new token alone on stdout (shown this once); list shows prefixes only.

${API}`,
  tasks: `usage: callplane tasks import FILE.csv [--dry-run] [--account ID] [--json]

Uploads the CSV file to POST /api/v2/tasks/csv (docs/tasks.md, "CSV upload") as it is read, with a
progress bar on stderr (a line per quarter when stderr is not a terminal), then prints the per-row
report: the counts, and each refused row and warning with its line number. --dry-run checks every
row and queues nothing; --json prints the API's answer as it is. Exit code 0 when every row was
accepted, 1 when some were refused or reading stopped early, 2 for a wrong command line.

${API}`,
  agents: `usage: callplane agents publish AGENT_ID
       callplane agents test AGENT_ID [--suite FILE.yaml | --suite-id ID] [--version staging|live|N]
                                       [--mode text|voice] [--iterations N] [--junit OUT.xml] [--timeout SECONDS]

publish: publishes the agent's staging configuration to live (POST /api/v2/agent/publish); the
replaced live configuration is kept as a version, whose id is printed (restore it to undo).

test: runs the agent's test suites (docs/testing-agents.md) against its staging configuration, the
live one or a stored version (--version), and prints each scenario's verdict with the reasons of
what failed. --mode voice calls the agent over a loopback SIP leg (spoken caller, each turn's
latency measured) instead of exchanging text. --suite imports a suite from a YAML (or .json) file first (the agent's suite of the
same name gets the next version) and runs only it; --junit writes JUnit XML for CI. Progress goes
to stderr. Exit code 0 when every scenario passed, 1 when one failed (or a run did not finish
within --timeout, default 1800), 2 for a wrong command line.

${API}`,
  calls: `usage: callplane calls watch [--interval SECONDS] [--lines N] [--account ID]

Shows the calls in progress — call tasks running on a carrier and open call conversations — with
each call's state and its latest transcript lines (--lines, default 3). Conversations and their
lines come pushed from the server's live feed as they are spoken (polled, on a server without
one); running call tasks are polled every --interval seconds (default 2). On a terminal the screen
is redrawn; otherwise each change is printed as a line. Ctrl-C (SIGINT) ends it with exit code 0.
A reseller's or partner's token without --account follows the live feed across every
organization below it, each call named with its organization.

${API}`,
  doctor: `usage: callplane doctor [--timeout SECONDS]

Checks this machine's configuration as \`callplane serve\` would read it (the same environment):
the configuration, the database (reachable, migrated), carriers, SIP (can the port be bound, what
is advertised), the speech engines (espeak-ng, pocketsphinx or the remote audio API) and the
language model providers. Each check prints OK, WARN or FAIL with what is wrong and how to fix it.
Network checks wait --timeout seconds at most (default 5). Exit code 1 when a check FAILs.`,
};
