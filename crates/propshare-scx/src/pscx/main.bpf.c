// SPDX-License-Identifier: GPL-2.0-only
/*
 * propshare-scx's own sched_ext BPF side.
 *
 * Written from the kernel's documentation of struct sched_ext_ops
 * (Documentation/scheduler/sched-ext.rst and the kernel-doc of
 * include/linux/sched/ext.h and kernel/sched/ext.c); not derived from any
 * scx scheduler. It decides nothing: the host (own.rs) runs the core
 * propshare `Scheduler`, which keeps exactly one decided task per CPU. This
 * program only
 *
 *  1. reports what the kernel does to every modelled task, explicitly and in
 *     order, through the `events` ring buffer: runnable, running,
 *     stopping (still runnable or not, with the run time since the task's
 *     last decision), quiescent, enqueue (the task waits for a decision),
 *     exit (it left sched_ext) and weight changes, and a property change of
 *     a running task as exactly that (see "Property changes" below);
 *  2. parks every task that waits for a decision in one custom DSQ
 *     (PSCX_WAIT_DSQ), so that the kernel keeps owning it;
 *  3. carries out decisions: the host runs the `pscx_decide` syscall program,
 *     which writes (pid, slice) into CPU k's slot and kicks CPU k; that CPU's
 *     ops.dispatch then moves exactly that task from the wait DSQ to its own
 *     local DSQ with that slice. A decision that finds its task not waiting
 *     is dropped and reported (PSCX_MISS);
 *  4. runs the host itself (it switches to SCHED_EXT once attached) at once
 *     on the CPU that woke it, outside the model (see pscx_select_cpu);
 *  5. is safe without the host: a task that has waited longer than
 *     `fallback_ns` (1 s by default, the watchdog allows 5 s) is run by the
 *     first CPU that dispatches with no decision pending (PSCX_FALLBACK), and
 *     a BPF timer kicks every CPU while such a task waits, or while a CPU's
 *     decision has not been taken for 20 ms. When the host exits, for any
 *     reason, the kernel unloads this program and hands every task back to
 *     the fair class.
 *
 * SCX_OPS_ENQ_LAST is set, so a task whose slice ended always comes back
 * through ops.enqueue (the kernel would otherwise refill the slice of the
 * last runnable task of a CPU), and ops.select_cpu never dispatches, so
 * every wake-up is decided by the host.
 *
 * Property changes. When the kernel changes a property of a task that is
 * running (its policy, nice, cgroup; sched_setscheduler, set_user_nice,
 * a cgroup move), it dequeues the task with DEQUEUE_SAVE (not
 * DEQUEUE_SLEEP), changes the property, enqueues it again with
 * ENQUEUE_RESTORE and makes it current again: ops.stopping(p, false),
 * ops.quiescent, then (if it stays in sched_ext) ops.runnable,
 * ops.enqueue and ops.running, all under its runqueue's lock
 * (kernel/sched/ext.c: dequeue_task_scx calls ops.stopping early for the
 * current task; set_next_task_scx takes it off whatever DSQ ops.enqueue put
 * it in and calls ops.running). Reported as they come, that reads as a
 * block, a wake-up and a wait for a decision, while the task in fact goes
 * on running undecided, and the host's next decision for it is dropped.
 * So the stop of the running task is held back until ops.quiescent says
 * why it was dequeued: SCX_DEQ_SLEEP is a block (reported then); anything
 * else is a property change, after which either ops.disable (it left
 * sched_ext: reported as PSCX_EXIT with its run time) or ops.runnable and
 * ops.enqueue follow, which put it back in its CPU's local DSQ with the
 * rest of its slice and report only PSCX_KEPT: it keeps its decision. A
 * task that enters sched_ext while it runs (ops.enable while it is its
 * CPU's current task) is not reported until its first real ops.enqueue: it
 * gets a slice of 1 ns and a preempting kick, so it comes back through
 * ops.enqueue at once and waits for a decision like any other.
 */
#include <scx/common.bpf.h>
#include "intf.h"

char _license[] SEC("license") = "GPL";

/* Set by the host before load. */
const volatile u32 nr_cpus = 1;
const volatile u64 fallback_ns = 1000000000ULL;
const volatile u64 fallback_slice_ns = 4000000ULL;
const volatile s32 host_tgid;
/* End every decided slice on time with a per-CPU timer (--exact-slices):
 * without it the kernel ends a slice only at a tick (HZ=250), so a 4 ms
 * slice runs 4-8 ms natively and more under emulation. */
const volatile bool exact_slices;

#define WATCH_PERIOD_NS 100000000ULL
#define SLOT_STALE_NS 20000000ULL

UEI_DEFINE(uei);

/* Counters, read by the host through the skeleton's bss. */
u64 nr_events, nr_lost, nr_decided, nr_moved, nr_missed, nr_fallback, nr_watch_kicks;
/* Property changes of a running task (see "Property changes"): seen, kept
 * running with their decision, and tasks that entered while running. */
u64 nr_changes, nr_kept, nr_entered_running;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PSCX_MAX_CPUS);
	__type(key, u32);
	__type(value, struct pscx_slot);
} slots SEC(".maps");

struct task_ctx {
	u64 running_at; /* when it last started running */
	u64 ran;        /* run time since its last decision */
	u64 queued_at;  /* when it last entered the wait DSQ */
	u64 cgroup;     /* its cgroup's kernfs id (0: unknown) */
	/* A property change of the running task (see "Property changes"):
	 * stop_pending: ops.stopping(p, false) ran for it and ops.quiescent has
	 * not yet said whether it blocked; changing: it did not block, the kernel
	 * is changing a property and will put it back; entering: it switched
	 * into sched_ext while running. */
	u8 stop_pending, changing, entering;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct task_ctx);
} task_ctxs SEC(".maps");

struct watch_timer {
	struct bpf_timer timer;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct watch_timer);
} watch SEC(".maps");

/* One slice timer per CPU (exact_slices): armed when a modelled task starts
 * running with the rest of its slice, disarmed when it stops; when it fires
 * armed it ends that CPU's slice (SCX_KICK_PREEMPT). */
struct slice_timer {
	struct bpf_timer timer;
	u32 armed;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, PSCX_MAX_CPUS);
	__type(key, u32);
	__type(value, struct slice_timer);
} slice_timers SEC(".maps");

u64 nr_slice_ends;

static int slice_end_fn(void *map, int *key, struct bpf_timer *timer)
{
	struct slice_timer *st = bpf_map_lookup_elem(&slice_timers, key);

	if (st && st->armed) {
		st->armed = 0;
		scx_bpf_kick_cpu(*key, SCX_KICK_PREEMPT);
		__sync_fetch_and_add(&nr_slice_ends, 1);
	}
	return 0;
}

static struct task_ctx *ctx_of(struct task_struct *p)
{
	return bpf_task_storage_get(&task_ctxs, p, 0, 0);
}

static bool is_host(struct task_struct *p)
{
	return host_tgid && p->tgid == host_tgid;
}

/* The host's own threads and per-CPU kernel threads (with --all-tasks) run
 * at once and are not part of the model. */
static bool modelled(struct task_struct *p)
{
	if (is_host(p))
		return false;
	if ((p->flags & PF_KTHREAD) && p->nr_cpus_allowed == 1)
		return false;
	return true;
}

/* A cgroup's id as user space sees it (the inode number of its directory). */
static __always_inline u64 cgroup_id(struct cgroup *cgrp)
{
	return cgrp && cgrp->kn ? cgrp->kn->id : 0;
}

static __always_inline void emit(u32 kind, s32 pid, u32 weight, s32 cpu, u64 flags, u64 ran, u64 cpus, u64 cgroup, bool wake)
{
	struct pscx_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&nr_lost, 1);
		return;
	}
	e->kind = kind;
	e->pid = pid;
	e->cpu = cpu;
	e->weight = weight;
	e->flags = flags;
	e->ran = ran;
	e->cpus = cpus;
	e->cgroup = cgroup;
	e->ts = bpf_ktime_get_ns();
	/* Only the messages that free a CPU in the model wake the host; the
	 * others are read with them. */
	bpf_ringbuf_submit(e, wake ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	__sync_fetch_and_add(&nr_events, 1);
}

/* CPUs 0..63 of a cpumask (the host models affinity for those; ops.dispatch
 * checks every CPU). */
static __always_inline u64 low_cpus(const struct cpumask *m)
{
	return m ? m->bits[0] : ~0ULL;
}

/* A message about task p, with its weight, allowed CPUs and cgroup. */
static __always_inline void emit_task(u32 kind, struct task_struct *p, struct task_ctx *t, u64 flags, u64 ran, bool wake)
{
	emit(kind, p->pid, p->scx.weight, scx_bpf_task_cpu(p), flags, ran, low_cpus(p->cpus_ptr), t ? t->cgroup : 0,
	     wake);
}

s32 BPF_STRUCT_OPS(pscx_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	/* The host runs on an idle CPU, preferably the one that woke it: a
	 * message that frees a CPU in the model is sent from that CPU, which
	 * idles until the host decides, so the host's own run time fills that
	 * gap instead of being taken from a task running elsewhere, and its
	 * decision for that CPU needs no cross-CPU kick. A message sent from a
	 * busy CPU (a wake-up) must not leave the host queued behind that CPU's
	 * task while another CPU idles waiting for it. */
	if (is_host(p)) {
		s32 cpu = bpf_get_smp_processor_id();

		if (scx_bpf_test_and_clear_cpu_idle(cpu))
			return cpu;
		prev_cpu = scx_bpf_pick_idle_cpu(p->cpus_ptr, 0);
		return prev_cpu >= 0 ? prev_cpu : cpu;
	}
	/* Never dispatch here: every wake-up goes to ops.enqueue and the host. */
	return prev_cpu;
}

void BPF_STRUCT_OPS(pscx_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *t;

	if (!modelled(p)) {
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, fallback_slice_ns, enq_flags);
		return;
	}
	t = ctx_of(p);
	if (t && (t->changing || t->entering) && scx_bpf_task_running(p)) {
		/* The running task is put back after a property change: it stays
		 * current (set_next_task_scx takes it off the local DSQ again). */
		if (t->entering) {
			/* Not decided yet: a 1 ns slice and a preempting kick end
			 * its run at once; it comes back here to be decided. */
			t->entering = 0;
			scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, 1, enq_flags);
			scx_bpf_kick_cpu(scx_bpf_task_cpu(p), SCX_KICK_PREEMPT);
			__sync_fetch_and_add(&nr_entered_running, 1);
			return;
		}
		t->changing = 0;
		scx_bpf_dsq_insert(p, SCX_DSQ_LOCAL, p->scx.slice, enq_flags);
		__sync_fetch_and_add(&nr_kept, 1);
		emit_task(PSCX_KEPT, p, t, enq_flags, t->ran, false);
		return;
	}
	if (t) {
		t->changing = 0;
		t->entering = 0;
	}
	if (t)
		t->queued_at = bpf_ktime_get_ns();
	scx_bpf_dsq_insert(p, PSCX_WAIT_DSQ, fallback_slice_ns, enq_flags);
	emit_task(PSCX_ENQUEUE, p, t, enq_flags, t ? t->ran : 0, true);
}

void BPF_STRUCT_OPS(pscx_dispatch, s32 cpu, struct task_struct *prev)
{
	struct task_struct *p;
	struct pscx_slot *s;
	struct task_ctx *t;
	u32 key = cpu;
	u64 now = bpf_ktime_get_ns();
	s32 pid;

	s = bpf_map_lookup_elem(&slots, &key);
	if (!s)
		return;
	pid = __sync_lock_test_and_set(&s->pid, 0);
	if (pid > 0) {
		u64 slice = s->slice;
		bool moved = false, allowed = true;

		bpf_for_each(scx_dsq, p, PSCX_WAIT_DSQ, 0) {
			if (p->pid != pid)
				continue;
			if (!bpf_cpumask_test_cpu(cpu, p->cpus_ptr)) {
				allowed = false;
				break;
			}
			t = ctx_of(p);
			if (t)
				t->ran = 0;
			scx_bpf_dsq_move_set_slice(BPF_FOR_EACH_ITER, slice);
			moved = scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0);
			break;
		}
		if (moved) {
			__sync_fetch_and_add(&nr_moved, 1);
		} else {
			/* Say why, for the host's statistics: where the task was. */
			struct task_struct *q = bpf_task_from_pid(pid);
			u64 why = allowed ? 0 : PSCX_MISS_NOT_ALLOWED, where = 0;

			if (!q) {
				why |= PSCX_MISS_GONE;
			} else {
				if (scx_bpf_task_running(q))
					why |= PSCX_MISS_RUNNING;
				if (q->scx.dsq)
					why |= PSCX_MISS_QUEUED;
				if (q->on_rq)
					why |= PSCX_MISS_RUNNABLE;
				where = scx_bpf_task_cpu(q);
				bpf_task_release(q);
			}
			__sync_fetch_and_add(&nr_missed, 1);
			emit(PSCX_MISS, pid, 0, cpu, why, where, 0, 0, true);
		}
		return;
	}
	/* The safety net: no decision for this CPU, and the longest-waiting task
	 * has waited too long. */
	bpf_for_each(scx_dsq, p, PSCX_WAIT_DSQ, 0) {
		t = ctx_of(p);
		if (t && now - t->queued_at >= fallback_ns && bpf_cpumask_test_cpu(cpu, p->cpus_ptr) &&
		    scx_bpf_dsq_move(BPF_FOR_EACH_ITER, p, SCX_DSQ_LOCAL, 0)) {
			__sync_fetch_and_add(&nr_fallback, 1);
			emit_task(PSCX_FALLBACK, p, t, 0, 0, false);
		}
		break;
	}
}

void BPF_STRUCT_OPS(pscx_runnable, struct task_struct *p, u64 enq_flags)
{
	struct task_ctx *t;

	if (!modelled(p))
		return;
	t = ctx_of(p);
	/* Put back after a property change, or entering while it runs: not a
	 * wake-up (see "Property changes"). */
	if (t && (t->changing || t->entering))
		return;
	emit_task(PSCX_RUNNABLE, p, t, enq_flags, 0, false);
}

void BPF_STRUCT_OPS(pscx_running, struct task_struct *p)
{
	struct task_ctx *t;

	if (!modelled(p))
		return;
	t = ctx_of(p);
	if (t)
		t->running_at = bpf_ktime_get_ns();
	if (exact_slices) {
		u32 key = scx_bpf_task_cpu(p);
		struct slice_timer *st = bpf_map_lookup_elem(&slice_timers, &key);

		if (st && p->scx.slice > 0 && p->scx.slice != SCX_SLICE_INF) {
			st->armed = 1;
			bpf_timer_start(&st->timer, p->scx.slice, 0);
		}
	}
	emit_task(PSCX_RUNNING, p, t, 0, t ? t->ran : 0, false);
}

void BPF_STRUCT_OPS(pscx_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx *t;

	if (!modelled(p))
		return;
	t = ctx_of(p);
	if (t && t->running_at)
		t->ran += bpf_ktime_get_ns() - t->running_at;
	if (exact_slices) {
		u32 key = scx_bpf_task_cpu(p);
		struct slice_timer *st = bpf_map_lookup_elem(&slice_timers, &key);

		if (st)
			st->armed = 0;
	}
	/* Still runnable: it either comes back through ops.enqueue (its slice
	 * ended, or it was preempted) or stays at the head of its CPU's local
	 * DSQ (a higher class took the CPU for a while); the host waits for the
	 * enqueue. Not runnable: it blocked, exits, or a property of it is being
	 * changed; ops.quiescent, which comes next, tells which. */
	if (!runnable && t) {
		t->stop_pending = 1;
		return;
	}
	emit_task(PSCX_STOPPING, p, t, runnable ? 1 : 0, t ? t->ran : 0, !runnable);
}

void BPF_STRUCT_OPS(pscx_quiescent, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx *t;

	if (!modelled(p))
		return;
	t = ctx_of(p);
	if (t && t->stop_pending) {
		t->stop_pending = 0;
		if (deq_flags & SCX_DEQ_SLEEP) {
			/* It blocked (or exits): that frees its CPU. */
			emit_task(PSCX_STOPPING, p, t, 0, t->ran, true);
		} else {
			/* A property change: held back until it is put back
			 * (ops.enqueue) or leaves (ops.disable). */
			t->changing = 1;
			__sync_fetch_and_add(&nr_changes, 1);
		}
	}
	emit_task(PSCX_QUIESCENT, p, t, deq_flags, 0, false);
}

void BPF_STRUCT_OPS(pscx_set_weight, struct task_struct *p, u32 weight)
{
	struct task_ctx *t;

	if (!modelled(p))
		return;
	t = ctx_of(p);
	emit(PSCX_WEIGHT, p->pid, weight, scx_bpf_task_cpu(p), 0, 0, low_cpus(p->cpus_ptr), t ? t->cgroup : 0, false);
}

void BPF_STRUCT_OPS(pscx_set_cpumask, struct task_struct *p, const struct cpumask *cpumask)
{
	if (modelled(p))
		emit(PSCX_CPUMASK, p->pid, p->scx.weight, scx_bpf_task_cpu(p), 0, 0, low_cpus(cpumask),
		     0, false);
}

s32 BPF_STRUCT_OPS(pscx_init_task, struct task_struct *p, struct scx_init_task_args *args)
{
	struct task_ctx *t = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!t)
		return -ENOMEM;
	t->cgroup = cgroup_id(args->cgroup);
	return 0;
}

void BPF_STRUCT_OPS(pscx_enable, struct task_struct *p)
{
	struct task_ctx *t = ctx_of(p);

	if (t) {
		t->ran = 0;
		t->running_at = 0;
		t->stop_pending = 0;
		t->changing = 0;
		/* Switched into sched_ext while it is its CPU's current task (a
		 * sched_setscheduler of the running task, or the scheduler being
		 * loaded): see "Property changes". */
		t->entering = modelled(p) && scx_bpf_task_running(p);
	}
}

/* The task leaves sched_ext: it exits (ops.disable comes before
 * ops.exit_task) or it switched to another class while enabled. */
void BPF_STRUCT_OPS(pscx_disable, struct task_struct *p)
{
	struct task_ctx *t = ctx_of(p);
	u64 ran = 0;

	if (t) {
		/* Its run time since its decision, if it left while it ran. */
		if (t->changing || t->stop_pending)
			ran = t->ran;
		t->stop_pending = 0;
		t->changing = 0;
		t->entering = 0;
	}
	if (modelled(p))
		emit_task(PSCX_EXIT, p, t, 0, ran, true);
}

/* Cgroups (cgroup v2 `cpu.weight`, 1..10000, 100 by default). The kernel
 * calls cgroup_init for every cgroup that exists when the scheduler loads
 * (parents first) and for every new one; the host builds the tree from these
 * messages and weights each task by its exact share of it. */
s32 BPF_STRUCT_OPS_SLEEPABLE(pscx_cgroup_init, struct cgroup *cgrp, struct scx_cgroup_init_args *args)
{
	struct cgroup_subsys_state *parent = cgrp->self.parent;

	emit(PSCX_CGROUP_INIT, 0, args->weight, -1, 0, parent ? cgroup_id(parent->cgroup) : 0, 0, cgroup_id(cgrp),
	     false);
	return 0;
}

void BPF_STRUCT_OPS(pscx_cgroup_exit, struct cgroup *cgrp)
{
	emit(PSCX_CGROUP_EXIT, 0, 0, -1, 0, 0, 0, cgroup_id(cgrp), false);
}

void BPF_STRUCT_OPS(pscx_cgroup_set_weight, struct cgroup *cgrp, u32 weight)
{
	emit(PSCX_CGROUP_WEIGHT, 0, weight, -1, 0, 0, 0, cgroup_id(cgrp), false);
}

void BPF_STRUCT_OPS(pscx_cgroup_move, struct task_struct *p, struct cgroup *from, struct cgroup *to)
{
	struct task_ctx *t = ctx_of(p);

	if (t)
		t->cgroup = cgroup_id(to);
	if (modelled(p))
		emit_task(PSCX_CGROUP_MOVE, p, t, 0, 0, false);
}

static int watch_fn(void *map, int *key, struct bpf_timer *timer)
{
	u64 now = bpf_ktime_get_ns();
	struct task_struct *p;
	struct task_ctx *t;
	bool stale = false;
	u32 cpu;

	bpf_for_each(scx_dsq, p, PSCX_WAIT_DSQ, 0) {
		t = ctx_of(p);
		if (t && now - t->queued_at >= fallback_ns)
			stale = true;
		break;
	}
	bpf_for(cpu, 0, nr_cpus) {
		struct pscx_slot *s = bpf_map_lookup_elem(&slots, &cpu);

		if (stale || (s && s->pid > 0 && now - s->at >= SLOT_STALE_NS)) {
			scx_bpf_kick_cpu(cpu, 0);
			__sync_fetch_and_add(&nr_watch_kicks, 1);
		}
	}
	bpf_timer_start(timer, WATCH_PERIOD_NS, 0);
	return 0;
}

s32 BPF_STRUCT_OPS_SLEEPABLE(pscx_init)
{
	struct bpf_timer *timer;
	u32 key = 0;
	s32 ret;

	ret = scx_bpf_create_dsq(PSCX_WAIT_DSQ, -1);
	if (ret)
		return ret;
	if (exact_slices) {
		u32 cpu;

		bpf_for(cpu, 0, nr_cpus) {
			struct slice_timer *st = bpf_map_lookup_elem(&slice_timers, &cpu);

			if (!st)
				return -ESRCH;
			bpf_timer_init(&st->timer, &slice_timers, CLOCK_MONOTONIC);
			bpf_timer_set_callback(&st->timer, slice_end_fn);
		}
	}
	timer = bpf_map_lookup_elem(&watch, &key);
	if (!timer)
		return -ESRCH;
	bpf_timer_init(timer, &watch, CLOCK_MONOTONIC);
	bpf_timer_set_callback(timer, watch_fn);
	return bpf_timer_start(timer, WATCH_PERIOD_NS, 0);
}

void BPF_STRUCT_OPS(pscx_exit, struct scx_exit_info *ei)
{
	UEI_RECORD(uei, ei);
}

/* The host's decision: run `pid` on `cpu` for `slice` ns (pid > 0), or only
 * kick `cpu` (pid == 0; preempt: end its current task's slice). */
SEC("syscall")
int pscx_decide(struct pscx_decision *d)
{
	u32 cpu = d->cpu;
	struct pscx_slot *s;

	if (cpu >= nr_cpus)
		return -EINVAL;
	if (d->pid > 0) {
		s = bpf_map_lookup_elem(&slots, &cpu);
		if (!s)
			return -EINVAL;
		s->slice = d->slice;
		s->at = bpf_ktime_get_ns();
		__sync_lock_test_and_set(&s->pid, d->pid);
		__sync_fetch_and_add(&nr_decided, 1);
	}
	scx_bpf_kick_cpu(cpu, d->preempt ? SCX_KICK_PREEMPT : 0);
	return 0;
}

SCX_OPS_DEFINE(pscx_ops,
	       .select_cpu = (void *)pscx_select_cpu,
	       .enqueue = (void *)pscx_enqueue,
	       .dispatch = (void *)pscx_dispatch,
	       .runnable = (void *)pscx_runnable,
	       .running = (void *)pscx_running,
	       .stopping = (void *)pscx_stopping,
	       .quiescent = (void *)pscx_quiescent,
	       .set_weight = (void *)pscx_set_weight,
	       .set_cpumask = (void *)pscx_set_cpumask,
	       .cgroup_init = (void *)pscx_cgroup_init,
	       .cgroup_exit = (void *)pscx_cgroup_exit,
	       .cgroup_set_weight = (void *)pscx_cgroup_set_weight,
	       .cgroup_move = (void *)pscx_cgroup_move,
	       .init_task = (void *)pscx_init_task,
	       .enable = (void *)pscx_enable,
	       .disable = (void *)pscx_disable,
	       .init = (void *)pscx_init,
	       .exit = (void *)pscx_exit,
	       .timeout_ms = 5000,
	       .name = "propshare");
