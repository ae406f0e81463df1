// The README as a new user follows it, so it cannot drift from the CLI: every command of its
// Commands table (each must exist, have docs in the Documentation list and start with --help),
// and the commands of "Try it without a cluster" and "On a node", run as written from the built
// CLI, as processes, in a temp dir. `npx provisioner` is this project's bin/run.js (checked once);
// 127.0.0.1:8080 becomes a free port. The two set-up commands (setup.sh, npm test) are not run
// here: the lead's full run is that.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { AdminClient } from '../../../src/core/agent/admin-client.js';
import { CLI, REPO_ROOT, runCli } from '../../support/cli.js';

const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');

/** The text of the `## title` section, up to the next `## `. */
function section(title: string): string {
  const start = README.indexOf(`\n## ${title}\n`);
  assert.ok(start >= 0, `README has a "## ${title}" section`);
  const end = README.indexOf('\n## ', start + 1);
  return README.slice(start, end < 0 ? undefined : end);
}

/** The lines of the ```bash blocks of a section (comments kept, blank lines dropped). */
function bashBlocks(text: string): string[][] {
  return [...text.matchAll(/```bash\n([\s\S]*?)```/gu)].map((m) =>
    (m[1] ?? '').split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#')),
  );
}

interface Line {
  readonly command: string;
  readonly comment: string;
}

function splitComment(line: string): Line {
  const at = line.indexOf('  #');
  return at < 0
    ? { command: line.trim(), comment: '' }
    : { command: line.slice(0, at).trim(), comment: line.slice(at + 3).trim() };
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  assert.ok(address !== null && typeof address === 'object');
  return address.port;
}

interface TableRow {
  readonly command: string;
  readonly docs: readonly string[];
}

function commandsTable(): TableRow[] {
  return section('Commands')
    .split('\n')
    .filter((l) => l.startsWith('| `provisioner '))
    .map((l) => {
      const cells = l.split('|').map((c) => c.trim());
      // A command of a topic is written with a space (`rollout status`), its manifest id with a colon.
      const command = /^`provisioner ([a-z-]+(?: [a-z-]+)?)`$/u.exec(cells[1] ?? '')?.[1]?.replace(' ', ':');
      assert.ok(command !== undefined, `a table row names one command: ${l}`);
      return { command, docs: [...(cells[3] ?? '').matchAll(/\]\(([^)]+)\)/gu)].map((m) => m[1] ?? '') };
    });
}

describe('README', () => {
  it('the Commands table lists every command of the CLI, each with docs that exist and are in the Documentation list', () => {
    const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'oclif.manifest.json'), 'utf8')) as {
      commands: Record<string, unknown>;
    };
    const rows = commandsTable();
    assert.deepEqual(rows.map((r) => r.command).sort(), Object.keys(manifest.commands).sort());
    const documentation = section('Documentation');
    for (const row of rows) {
      assert.ok(row.docs.length > 0, `${row.command} has docs`);
      for (const link of row.docs) {
        // A link may point into a section (operations.md#node-cleanup): the file is what must exist.
        const [doc = link, anchor] = link.split('#');
        assert.ok(existsSync(join(REPO_ROOT, doc)), `${doc} exists`);
        assert.ok(documentation.includes(`](${doc})`), `${doc} (${row.command}) is in the Documentation list`);
        if (anchor !== undefined) {
          const headings = readFileSync(join(REPO_ROOT, doc), 'utf8')
            .split('\n')
            .filter((l) => l.startsWith('#'))
            .map((l) =>
              l
                .replace(/^#+\s*/u, '')
                .toLowerCase()
                .replace(/[^a-z0-9 -]/gu, '')
                .replaceAll(' ', '-'),
            );
          assert.ok(headings.includes(anchor), `${link}: ${doc} has a heading #${anchor}`);
        }
      }
    }
  });

  it('every command of the table starts as written: `provisioner <command> --help`', async () => {
    for (const { command: id } of commandsTable()) {
      const command = id.replace(':', ' ');
      const r = await runCli([...command.split(' '), '--help'], { timeoutMs: 30_000 });
      assert.equal(r.code, 0, `${command} --help: ${r.stderr}`);
      assert.match(r.stdout, new RegExp(`\\$ provisioner ${command}\\b`, 'u'));
    }
  });

  it('`npx provisioner` in the checkout is this bin/run.js', () => {
    const r = spawnSync('npx', ['--offline', 'provisioner', '--version'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });
    const direct = spawnSync(process.execPath, [CLI, '--version'], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, direct.stdout);
  });

  it('the walkthrough leaves nothing untracked in the checkout: git ignores ./sandbox', () => {
    const r = spawnSync('git', ['check-ignore', '-q', 'sandbox/config/storageClassMap'], { cwd: REPO_ROOT });
    assert.equal(r.status, 0, 'sandbox/ is in .gitignore');
  });

  describe('"Try it without a cluster" and "On a node", run as written', () => {
    let dir = '';
    let port = 0;
    let agent: ReturnType<typeof spawn> | undefined;
    let agentStderr = '';
    let exited: Promise<number | null> = Promise.resolve(null);
    const blocks = bashBlocks(section('Try it without a cluster'));

    /** A README command line as it runs here. */
    const asRun = (command: string): string =>
      command
        .replaceAll('npx provisioner', `${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)}`)
        .replaceAll('127.0.0.1:8080', `127.0.0.1:${String(port)}`);

    function sh(command: string, env: NodeJS.ProcessEnv = {}): { code: number | null; out: string } {
      const r = spawnSync('bash', ['-c', asRun(command)], {
        cwd: dir,
        encoding: 'utf8',
        timeout: 60_000,
        env: { ...process.env, MY_NODE_NAME: '', PROVISIONER_CONFIG_DIR: undefined, ...env },
      });
      return { code: r.status, out: `${r.stdout}${r.stderr}` };
    }

    const isRead = (line: Line): boolean =>
      line.command.startsWith('curl') || line.command.startsWith('npx provisioner');

    /** The quoted output a comment promises ("a …b"), as pieces that must appear in order. */
    function promised(comment: string): string[] {
      const quoted = /"([^"]+)"/u.exec(comment)?.[1];
      return quoted === undefined
        ? []
        : quoted
            .split('…')
            .map((p) => p.trim())
            .filter((p) => p !== '');
    }

    function holds(line: Line, r: { code: number | null; out: string }): string | undefined {
      const code = Number(/\(exit (\d+)\)/u.exec(line.comment)?.[1] ?? '0');
      if (r.code !== code) return `exit ${String(r.code)}, expected ${String(code)}`;
      let at = 0;
      // Quotes in the comment of a command that prints are its output; elsewhere just words.
      for (const piece of isRead(line) ? promised(line.comment) : []) {
        const found = r.out.indexOf(piece, at);
        if (found < 0) return `output lacks ${JSON.stringify(piece)}`;
        at = found + piece.length;
      }
      const generation = /generation (\d+) serves/u.exec(line.comment)?.[1];
      if (line.command.startsWith('curl') && generation !== undefined) {
        if (!new RegExp(`^local_volume_provisioner_config_generation ${generation}$`, 'mu').test(r.out))
          return `metrics do not say generation ${generation}`;
      }
      return undefined;
    }

    /** Runs a line; a read (curl, provisioner) is retried for a while, as a user would look again. */
    async function step(raw: string, env: NodeJS.ProcessEnv = {}): Promise<void> {
      const line = splitComment(raw);
      const retry = isRead(line);
      const until = Date.now() + 15_000;
      for (;;) {
        const r = sh(line.command, env);
        const problem = holds(line, r);
        if (problem === undefined) return;
        if (!retry || Date.now() > until)
          assert.fail(`README: ${line.command}\n  ${problem}\n${r.out}\nagent:\n${agentStderr}`);
        await delay(200);
      }
    }

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'lvp-readme-'));
      port = await freePort();
    });

    after(async () => {
      agent?.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    });

    it('has the blocks this test follows: simulate, run --sandbox, then the two blocks of another terminal', () => {
      assert.equal(blocks.length, 4, 'four bash blocks');
      assert.deepEqual(blocks[0], ['npx provisioner simulate --demo']);
      assert.deepEqual(blocks[1], ['npx provisioner run --sandbox ./sandbox --listen-address 127.0.0.1:8080']);
    });

    it('`simulate --demo`', async () => {
      for (const line of blocks[0] ?? []) await step(line);
    });

    it('`run --sandbox ./sandbox`, then each command of the other terminal', async () => {
      const [command = ''] = blocks[1] ?? [];
      agent = spawn('bash', ['-c', `exec ${asRun(command)}`], {
        cwd: dir,
        stdio: ['ignore', 'ignore', 'pipe'],
        env: { ...process.env, MY_NODE_NAME: '', PROVISIONER_CONFIG_DIR: undefined },
      });
      agent.stderr?.setEncoding('utf8').on('data', (d: string) => (agentStderr += d));
      const child = agent;
      exited = new Promise((resolve) => child.on('exit', resolve));
      const client = new AdminClient(join(dir, 'sandbox/admin.sock'), { timeoutMs: 5000 });
      const paths = async (): Promise<string[]> =>
        (await client.status()).classes.flatMap((c) => c.persistentVolumes.map((p) => p.path));
      const until = Date.now() + 20_000;
      while ((await paths().catch(() => [])).length < 2) {
        assert.ok(Date.now() < until, `the sandbox agent did not publish its two volumes:\n${agentStderr}`);
        await delay(100);
      }
      for (const raw of [...(blocks[2] ?? []), ...(blocks[3] ?? [])]) {
        await step(raw);
        const made = /^mkdir (\S+)/u.exec(splitComment(raw).command)?.[1];
        if (made !== undefined) {
          // "its PV appears at once"
          const path = join(dir, made);
          const by = Date.now() + 10_000;
          while (!(await paths()).includes(path)) {
            assert.ok(Date.now() < by, `no PV for ${path}`);
            await delay(100);
          }
        }
      }
    });

    it('"On a node": diff-config against the running agent and between two files, reload', () => {
      const lines = bashBlocks(section('On a node')).flat().map(splitComment);
      const fixture = join(REPO_ROOT, 'test/fixtures/upstream/helm-configmap.yaml');
      mkdirSync(join(dir, 'main'));
      mkdirSync(join(dir, 'pr'));
      copyFileSync(fixture, join(dir, 'main/configmap.yaml'));
      writeFileSync(
        join(dir, 'pr/configmap.yaml'),
        readFileSync(fixture, 'utf8').replace('fsType: ext4', 'fsType: xfs'),
      );
      copyFileSync(join(dir, 'pr/configmap.yaml'), join(dir, 'new-configmap.yaml'));
      // On a node the admin socket is the default path; here it is the sandbox agent's.
      const env = { PROVISIONER_ADMIN_SOCKET: join(dir, 'sandbox/admin.sock') };
      const expected: [RegExp, number, RegExp][] = [
        // Against the agent's applied config (the sandbox's): they differ.
        [/^npx provisioner diff-config --to new-configmap\.yaml$/u, 1, /^Changes:$/mu],
        // fsType is new-pvs-only: not an orphans or ownership change, so the gate passes.
        [
          /--fail-on orphans,ownership$/u,
          0,
          /storageClassMap\.fast-disks\.fsType: "ext4" -> "xfs"\s+\[new-pvs-only\]/u,
        ],
        // The walkthrough left a broken edit on disk: reload says it is rejected.
        [/^npx provisioner reload$/u, 1, /^Rejected: /u],
      ];
      assert.equal(lines.length, expected.length, lines.map((l) => l.command).join('\n'));
      for (const [i, line] of lines.entries()) {
        const [pattern, code, output] = expected[i] ?? [/$^/u, 0, /$^/u];
        assert.match(line.command, pattern);
        const r = sh(line.command, env);
        assert.equal(r.code, code, `${line.command}\n${r.out}`);
        assert.match(r.out, output, line.command);
      }
    });
  });
});
