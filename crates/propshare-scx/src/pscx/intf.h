/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * What propshare-scx's own BPF side (main.bpf.c) and its host (own.rs)
 * exchange. Plain C types only: bindgen turns this file into Rust.
 */
#ifndef PSCX_INTF_H
#define PSCX_INTF_H

enum pscx_consts {
	/* Highest number of CPUs the slot array covers. */
	PSCX_MAX_CPUS = 512,
	/* The custom DSQ every modelled task waits in until it is decided. */
	PSCX_WAIT_DSQ = 0,
};

/* One message from the BPF side, in the order the kernel made the calls. */
enum pscx_kind {
	/* ops.runnable: the task became runnable (flags: enqueue flags). */
	PSCX_RUNNABLE = 1,
	/* ops.running: the task started running on cpu. */
	PSCX_RUNNING = 2,
	/* ops.stopping: it stopped on cpu; flags = 1 if still runnable; ran = its
	 * run time since its last decision (ns). */
	PSCX_STOPPING = 3,
	/* ops.quiescent: it is no longer runnable (flags: dequeue flags). */
	PSCX_QUIESCENT = 4,
	/* ops.enqueue: it waits for a decision (flags: enqueue flags; ran as
	 * for STOPPING). */
	PSCX_ENQUEUE = 5,
	/* ops.disable: it left sched_ext (exited, or switched class); ran: its
	 * run time since its decision if it left while running, else 0. */
	PSCX_EXIT = 6,
	/* ops.set_weight: its weight is now `weight`. */
	PSCX_WEIGHT = 7,
	/* ops.dispatch found the decided task of cpu not waiting (flags = 1: the
	 * task may not run on cpu): the decision was dropped. */
	PSCX_MISS = 8,
	/* ops.dispatch ran a task that had waited longer than the fallback time
	 * without a decision (the safety net). */
	PSCX_FALLBACK = 9,
	/* ops.set_cpumask: the CPUs the task may run on are now `cpus`. */
	PSCX_CPUMASK = 10,
	/* ops.cgroup_init: cgroup `cgroup` (parent: `ran`, 0 for none) exists
	 * with cpu.weight `weight`. */
	PSCX_CGROUP_INIT = 11,
	/* ops.cgroup_exit: cgroup `cgroup` is gone. */
	PSCX_CGROUP_EXIT = 12,
	/* ops.cgroup_set_weight: cgroup `cgroup`'s cpu.weight is now `weight`. */
	PSCX_CGROUP_WEIGHT = 13,
	/* ops.cgroup_move: the task moved to cgroup `cgroup`. */
	PSCX_CGROUP_MOVE = 14,
	/* A property of the running task changed (policy, nice, cgroup) and it
	 * stays in sched_ext: it keeps its CPU and its decision (ran: its run
	 * time since the decision). Not a stop, a block nor a wake-up. */
	PSCX_KEPT = 15,
};

/* What ops.dispatch found when it dropped a decision (PSCX_MISS flags). */
enum pscx_miss {
	/* The task may not run on that CPU. */
	PSCX_MISS_NOT_ALLOWED = 1,
	/* No task has that pid any more. */
	PSCX_MISS_GONE = 2,
	/* The task is running (on the CPU in `ran`). */
	PSCX_MISS_RUNNING = 4,
	/* The task is queued on some DSQ (not the wait DSQ: it was not found there). */
	PSCX_MISS_QUEUED = 8,
	/* The task is runnable (on a runqueue, as the kernel sees it). */
	PSCX_MISS_RUNNABLE = 16,
};

struct pscx_event {
	unsigned int kind;
	int pid;
	int cpu;
	unsigned int weight;
	unsigned long long flags;
	unsigned long long ran;
	unsigned long long ts;
	/* The CPUs 0..63 the task may run on (bit k: CPU k; CPUs from 64 on are
	 * checked by ops.dispatch only). */
	unsigned long long cpus;
	/* The task's cgroup (its kernfs id; 0: unknown), or the cgroup of a
	 * PSCX_CGROUP_* message. */
	unsigned long long cgroup;
};

/* The argument of the pscx_decide syscall program: run pid on cpu for slice
 * ns (pid > 0), or, with pid == 0, only kick cpu (preempt = 1: take the CPU
 * from its current sched_ext task). */
struct pscx_decision {
	int cpu;
	int pid;
	unsigned long long slice;
	unsigned int preempt;
	unsigned int pad;
};

/* One CPU's pending decision (pid 0: none). */
struct pscx_slot {
	int pid;
	unsigned int pad;
	unsigned long long slice;
	unsigned long long at;
};

#endif /* PSCX_INTF_H */
