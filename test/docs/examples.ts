import { spawn } from 'node:child_process';
import { SETTINGS } from '../../src/config/index.js';
import { ROOT, withoutOuterNpx } from '../server-process.js';

/**
 * The documentation's examples, as docs/development.md describes them: a ```console block whose
 * `$ ` lines are commands (a line ending in `\` goes on with the next) and whose other lines are
 * what the command before them prints. A command `$ [NAME=value ...] npm start &` says which
 * settings the block's service starts with; the commands before it run before the service starts
 * (to write a file it reads). Placeholders such as `<etag>` match loosely, and a
 * value they matched replaces the same placeholder in the block's later commands.
 */

export interface Step {
  /** As written, without `$ ` and continuation markers. */
  command: string;
  /** The lines the command prints, as written. */
  expected: string;
  /** 1-based line of the command in its file. */
  line: number;
}

export interface Example {
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The settings of the block's service, from its `npm start &` line. */
  env: Record<string, string>;
  /** The commands before that line, run before the service starts. */
  setup: Step[];
  steps: Step[];
}

/** What each placeholder stands for. */
export const PLACEHOLDERS: Readonly<Record<string, string>> = {
  timestamp: String.raw`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z?`,
  'request-id': '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',
  etag: String.raw`"\d+"`,
  cursor: '[A-Za-z0-9_.-]+',
  number: String.raw`\d+(?:\.\d+)?(?:e[-+]?\d+)?`,
  seconds: String.raw`\d+`,
};

const PLACEHOLDER = new RegExp(`<(${Object.keys(PLACEHOLDERS).join('|')})>`, 'g');
const START = /^((?:[A-Z][A-Z0-9_]*=\S+ )*)npm start &$/;
const FENCE = /^```(\S*)/;

/** The ```console blocks of a Markdown text. */
export function parseExamples(file: string, text: string): Example[] {
  const examples: Example[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (FENCE.exec(lines[i] ?? '')?.[1] !== 'console') continue;
    const example: Example = { file, line: i + 1, env: {}, setup: [], steps: [] };
    let step: Step | undefined;
    let continued = false;
    let started = false;
    for (i++; i < lines.length && !(lines[i] ?? '').startsWith('```'); i++) {
      const line = lines[i] ?? '';
      if (continued && step !== undefined) {
        step.command += `\n${line}`;
      } else if (line.startsWith('$ ')) {
        step = { command: line.slice(2), expected: '', line: i + 1 };
        const start = START.exec(step.command);
        if (start !== null && !started) {
          for (const pair of (start[1] ?? '').trim().split(' ').filter(Boolean)) {
            const [name = '', value = ''] = pair.split(/=(.*)/);
            example.env[name] = value;
          }
          started = true;
          example.setup = example.steps.splice(0);
          step = undefined;
          continue;
        }
        example.steps.push(step);
      } else if (step !== undefined) {
        step.expected += step.expected === '' && !/\S/.test(line) ? '' : `${line}\n`;
      } else if (line.trim() !== '') {
        throw new Error(`${file}:${i + 1}: an output before any command`);
      }
      continued = step !== undefined && line.endsWith('\\');
    }
    examples.push(example);
  }
  return examples;
}

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Whether `actual` is what `expected` shows: exactly, but for placeholders, `…` within a line
 * (any text) and a line that is `…` alone (any number of lines). Returns the placeholders' values,
 * or null.
 */
export function matchOutput(expected: string, actual: string): Map<string, string> | null {
  const names: string[] = [];
  const shown = expected.trimEnd();
  const pattern = (shown === '' ? [] : shown.split('\n'))
    .map((line) => {
      if (line === '…') return '(?:[^\\n]*\\n)*?';
      const parts = line.split(PLACEHOLDER);
      const body = parts
        .map((part, index) => {
          if (index % 2 === 1) {
            names.push(part);
            return `(${PLACEHOLDERS[part]})`;
          }
          return part.split('…').map(literal).join('[^\\n]*?');
        })
        .join('');
      return `${body}\\n`;
    })
    .join('');
  const found = new RegExp(`^${pattern}$`).exec(normalise(actual));
  if (found === null) return null;
  return new Map(names.map((name, index) => [name, found[index + 1] ?? '']));
}

/** Line ends as LF (curl -i prints the headers' CRLF), and one final newline. */
export function normalise(output: string): string {
  const text = output.replace(/\r\n/g, '\n').trimEnd();
  return text === '' ? '' : `${text}\n`;
}

/** The command as it is run: against the test's port, with the built packages as their commands. */
export function runnable(command: string, port: number, values: ReadonlyMap<string, string>): string {
  return command
    .replace(/\\\n/g, ' ')
    .replaceAll('localhost:8080', `127.0.0.1:${port}`)
    .replaceAll('npx greeting-service-conformance', `node ${ROOT}packages/conformance/dist/bin.js`)
    .replace(/npx greeting-service(?![\w-])/g, `node ${ROOT}dist/server.js`)
    .replace(PLACEHOLDER, (text, name: string) => {
      const value = values.get(name);
      if (value === undefined) throw new Error(`${text} in a command, before any output showed it`);
      return value;
    });
}

/** A variable of the configuration inherited from the test's environment must not reach a command, nor the outer npx's. */
const CLEAN_ENV = Object.fromEntries(
  Object.entries(withoutOuterNpx(process.env)).filter(
    ([name]) => !Object.values(SETTINGS).some(({ env }) => env === name) && name !== 'NODE_TEST_CONTEXT',
  ),
);

/** Runs a shell command; resolves with what it printed, stdout and stderr together. */
export function runCommand(command: string, timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', `${command} 2>&1`], { cwd: ROOT, env: CLEAN_ENV, timeout: timeoutMs });
    let output = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
    });
    child.on('error', reject);
    child.on('close', () => resolve(output));
  });
}

export interface Mismatch {
  step: Step;
  actual: string;
}

/** Runs an example's commands in order against the service at `port`; the first step whose output differs, or null. */
export function runExample(example: Example, port: number): Promise<Mismatch | null> {
  return runSteps(example.steps, port);
}

/** Runs the commands an example runs before its service starts; the first whose output differs, or null. */
export function runSetup(example: Example): Promise<Mismatch | null> {
  return runSteps(example.setup, 0);
}

async function runSteps(steps: readonly Step[], port: number): Promise<Mismatch | null> {
  const values = new Map<string, string>();
  for (const step of steps) {
    const actual = await runCommand(runnable(step.command, port, values));
    const captured = matchOutput(step.expected, actual);
    if (captured === null) return { step, actual };
    for (const [name, value] of captured) values.set(name, value);
  }
  return null;
}

/** Lines of the other shell blocks that show an output, which no test would compare. */
export function untestedOutputs(file: string, text: string): string[] {
  const found: string[] = [];
  let inBlock = false;
  let shell = false;
  text.split('\n').forEach((line, index) => {
    const fence = FENCE.exec(line);
    if (fence !== null) {
      shell = !inBlock && ['sh', 'bash', 'shell'].includes(fence[1] ?? '');
      inBlock = !inBlock;
      return;
    }
    if (shell && /(?:^|\s)#\s*(?:\{"|\[\{|HTTP\/1|\d{3} \{)/.test(line)) found.push(`${file}:${index + 1}: ${line}`);
  });
  return found;
}
