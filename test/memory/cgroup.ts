import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * A memory cgroup of its own for a process under test, as a pod's memory limit makes one: cgroup v2
 * where the machine has it, else v1's memory controller (root makes either). Swap is left out, so
 * that the limit is the limit.
 */
export interface MemoryCgroup {
  /** The file a process joins the cgroup by. */
  readonly procs: string;
  /** Processes the kernel killed in it for want of memory. */
  oomKills(): number;
  /** Bytes charged to it now. */
  usage(): number;
  remove(): void;
}

const V2_ROOT = '/sys/fs/cgroup';
const V1_ROOT = '/sys/fs/cgroup/memory';

/** Why no memory cgroup can be made here, or null. */
export function cgroupMissing(): string | null {
  if (process.platform !== 'linux') return 'memory cgroups are Linux only';
  if (process.getuid?.() !== 0) return 'making a memory cgroup needs root';
  if (existsSync(join(V2_ROOT, 'cgroup.controllers')) || existsSync(join(V1_ROOT, 'memory.limit_in_bytes')))
    return null;
  return 'this machine has no memory cgroup controller';
}

const read = (file: string): string => readFileSync(file, 'utf8');

export function memoryCgroup(name: string, limitBytes: number): MemoryCgroup {
  const v2 = existsSync(join(V2_ROOT, 'cgroup.controllers'));
  if (v2) {
    // The memory controller must be handed down to the new group.
    if (!read(join(V2_ROOT, 'cgroup.subtree_control')).includes('memory')) {
      writeFileSync(join(V2_ROOT, 'cgroup.subtree_control'), '+memory');
    }
    const dir = join(V2_ROOT, name);
    if (!existsSync(dir)) mkdirSync(dir);
    writeFileSync(join(dir, 'memory.max'), String(limitBytes));
    if (existsSync(join(dir, 'memory.swap.max'))) writeFileSync(join(dir, 'memory.swap.max'), '0');
    return {
      procs: join(dir, 'cgroup.procs'),
      oomKills: () => Number(/^oom_kill (\d+)$/m.exec(read(join(dir, 'memory.events')))?.[1] ?? 0),
      usage: () => Number(read(join(dir, 'memory.current'))),
      remove: () => rmdirSync(dir),
    };
  }
  const dir = join(V1_ROOT, name);
  if (!existsSync(dir)) mkdirSync(dir);
  writeFileSync(join(dir, 'memory.limit_in_bytes'), String(limitBytes));
  const swap = join(dir, 'memory.memsw.limit_in_bytes');
  if (existsSync(swap)) writeFileSync(swap, String(limitBytes));
  // Kernel versions before 4.13 do not count kills; under_oom still tells of one under way.
  const oomControl = () => read(join(dir, 'memory.oom_control'));
  return {
    procs: join(dir, 'cgroup.procs'),
    oomKills: () => Number(/^oom_kill (\d+)$/m.exec(oomControl())?.[1] ?? 0),
    usage: () => Number(read(join(dir, 'memory.usage_in_bytes'))),
    remove: () => rmdirSync(dir),
  };
}
