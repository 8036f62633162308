// The commands that need no server configuration and none of the server's code: help, the
// commands that act through the API (tokens, tasks, agents, calls) and doctor. `callplane`
// (bin/callplane.js) runs them from here without loading the service (a command starts in a
// fraction of the time); src/main.ts runs them the same way for `node dist/main.js …`.
import { CallplaneError } from '../../sdk/client.js';
import { agentsCommand } from './agents.ts';
import { callsCommand } from './calls-watch.ts';
import { tasksCommand } from './tasks-import.ts';
import { tokensCommand } from './tokens.ts';
import { HELP, isClientCommand, reportUsageError, type ClientCommandName } from './usage.ts';

const COMMANDS: Record<ClientCommandName, (argv: string[]) => Promise<number>> = {
  tokens: tokensCommand,
  tasks: tasksCommand,
  agents: agentsCommand,
  calls: callsCommand,
  // Loaded when run: it opens the database, whose drivers the API commands never need.
  doctor: async (argv) => (await import('./doctor.ts')).doctorCommand(argv),
  help: async ([topic]) => {
    console.log(HELP[topic ?? 'main'] ?? HELP.main);
    return 0;
  },
};

/** The command's runner when the command line is one of these commands, else undefined (serve, migrate, token). */
export function clientCommand(argv: string[]): ((argv: string[]) => Promise<number>) | undefined {
  if (!isClientCommand(argv)) return undefined;
  return argv[0] === '--help' || argv[0] === '-h' ? COMMANDS.help : COMMANDS[argv[0] as ClientCommandName];
}

/**
 * Prints a command-line mistake (exit code 2, with the usage) or an API's error answer (exit code
 * 1, its status and message), and answers the exit code; undefined for any other error.
 */
export function reportCliError(err: unknown): number | undefined {
  const usage = reportUsageError(err);
  if (usage !== undefined) return usage;
  if (err instanceof CallplaneError) {
    // The API's own answer: its status and message (naming the field for a 400).
    console.error(`callplane: the API answered ${err.status}: ${err.message}`);
    return 1;
  }
  return undefined;
}

/** Runs `argv` when it is one of these commands: true when it was (process.exitCode is set). */
export async function runClientCommand(argv: string[]): Promise<boolean> {
  const command = clientCommand(argv);
  if (!command) return false;
  try {
    process.exitCode = await command(argv.slice(1));
  } catch (err) {
    const code = reportCliError(err);
    if (code === undefined) {
      console.error(err);
      process.exitCode = 1;
    } else process.exitCode = code;
  }
  return true;
}
