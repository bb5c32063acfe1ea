/* Guest workload for scripts/kernel-vm.sh: a CPU spinner or a duty-cycle
 * ("I/O-bound") task that samples its own CPU time on a shared grid.
 *
 *   spin now                      print CLOCK_MONOTONIC in ms
 *   spin [-N name] [-n nice] [-e] [-S start_ms] [-E end_ms] [-g grid_ms]
 *        [-r at_ms:nice] [-b spin_ms:sleep_ms] [-c cpu] [-C cgroup_dir]
 *        [-f flip_ms] [-m hop_ms:cgroup_dir_a:cgroup_dir_b]
 *
 * -C moves itself into that cgroup v2 directory and -c pins itself to one
 * CPU (both first); -e switches itself to SCHED_EXT (policy 7); -S/-E are absolute
 * CLOCK_MONOTONIC ms (it sleeps until -S and stops at -E); -r renices itself
 * at start+at_ms; -b alternates spin_ms of CPU time with sleep_ms of sleep.
 * -f switches itself to SCHED_OTHER and straight back every flip_ms while it
 * runs (a policy change of a running task, twice); -m moves itself into
 * cgroup_dir_a and cgroup_dir_b in turn every hop_ms (a cgroup move of a
 * running task). At -E it prints one line:
 *   RESULT name=N pid=P nice=N0 renice=AT:N1 duty=S:Z start=S end=E grid=G cpu_us=C flips=F hops=H samples=a,b,...
 * where samples are its CPU time (us) at start + k*grid.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

static int join_cgroup(const char *dir) {
	char path[512];
	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f)) { perror("spin: cgroup.procs"); return -1; }
	return 0;
}

static long long now_ns(clockid_t c) {
	struct timespec t;
	clock_gettime(c, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc > 1 && !strcmp(argv[1], "now")) {
		printf("%lld\n", now_ns(CLOCK_MONOTONIC) / 1000000);
		return 0;
	}
	const char *name = "spin";
	int nice0 = 0, ext = 0, renice_at = -1, nice1 = 0, duty_spin = 0, duty_sleep = 0;
	long long start = 0, end = 0, grid = 200;
	int c, pin = -1;
	const char *cgroup = NULL;
	int flip_ms = 0, hop_ms = 0;
	char hop_a[256] = "", hop_b[256] = "";
	while ((c = getopt(argc, argv, "N:n:eS:E:g:r:b:c:C:f:m:")) != -1) {
		switch (c) {
		case 'c': pin = atoi(optarg); break;
		case 'C': cgroup = optarg; break;
		case 'N': name = optarg; break;
		case 'n': nice0 = atoi(optarg); break;
		case 'e': ext = 1; break;
		case 'S': start = atoll(optarg); break;
		case 'E': end = atoll(optarg); break;
		case 'g': grid = atoll(optarg); break;
		case 'r': if (sscanf(optarg, "%d:%d", &renice_at, &nice1) != 2) { fprintf(stderr, "spin: bad -r\n"); return 2; } break;
		case 'b': if (sscanf(optarg, "%d:%d", &duty_spin, &duty_sleep) != 2) { fprintf(stderr, "spin: bad -b\n"); return 2; } break;
		case 'f': flip_ms = atoi(optarg); break;
		case 'm': if (sscanf(optarg, "%d:%255[^:]:%255s", &hop_ms, hop_a, hop_b) != 3) { fprintf(stderr, "spin: bad -m\n"); return 2; } break;
		default: fprintf(stderr, "spin: bad option\n"); return 2;
		}
	}
	if (grid <= 0 || end <= start) { fprintf(stderr, "spin: need -S < -E and -g > 0\n"); return 2; }
	if (cgroup && join_cgroup(cgroup)) return 1;
	if (pin >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(pin, &set);
		if (sched_setaffinity(0, sizeof set, &set)) { perror("spin: sched_setaffinity"); return 1; }
	}
	if (ext) {
		struct sched_param p = { 0 };
		if (sched_setscheduler(0, 7, &p)) { perror("spin: SCHED_EXT"); return 1; }
	}
	if (setpriority(PRIO_PROCESS, 0, nice0)) { perror("spin: setpriority"); return 1; }
	long long s_ns = start * 1000000LL, e_ns = end * 1000000LL, g_ns = grid * 1000000LL;
	struct timespec ts = { s_ns / 1000000000LL, s_ns % 1000000000LL };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) {}
	int nsamp = (int)((e_ns - s_ns) / g_ns) + 1;
	long long *samp = calloc(nsamp, sizeof *samp);
	long long cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	int next = 0, reniced = 0, flips = 0, hops = 0;
	long long next_flip = s_ns + flip_ms * 1000000LL, next_hop = s_ns + hop_ms * 1000000LL;
	long long burst_start = cpu0;
	volatile unsigned long x = 0;
	for (;;) {
		long long t = now_ns(CLOCK_MONOTONIC);
		if (t >= s_ns + (long long)next * g_ns) {
			long long cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
			while (next < nsamp && t >= s_ns + (long long)next * g_ns) samp[next++] = cpu / 1000;
		}
		if (t >= e_ns) break;
		if (renice_at >= 0 && !reniced && t >= s_ns + renice_at * 1000000LL) {
			setpriority(PRIO_PROCESS, 0, nice1);
			reniced = 1;
		}
		if (flip_ms > 0 && t >= next_flip) {
			struct sched_param p = { 0 };
			sched_setscheduler(0, SCHED_OTHER, &p);
			if (ext && sched_setscheduler(0, 7, &p)) { perror("spin: SCHED_EXT again"); return 1; }
			flips++;
			next_flip += flip_ms * 1000000LL;
		}
		if (hop_ms > 0 && t >= next_hop) {
			if (join_cgroup(hops % 2 ? hop_b : hop_a)) return 1;
			hops++;
			next_hop += hop_ms * 1000000LL;
		}
		if (duty_spin > 0 && now_ns(CLOCK_THREAD_CPUTIME_ID) - burst_start >= duty_spin * 1000000LL) {
			struct timespec z = { duty_sleep / 1000, (duty_sleep % 1000) * 1000000L };
			nanosleep(&z, NULL);
			burst_start = now_ns(CLOCK_THREAD_CPUTIME_ID);
		}
		for (int i = 0; i < 2000; i++) x += i;
	}
	long long cpu = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	while (next < nsamp) samp[next++] = cpu / 1000;
	size_t cap = 256 + (size_t)nsamp * 24;
	char *out = malloc(cap);
	int len = snprintf(out, cap, "RESULT name=%s pid=%d nice=%d renice=%d:%d duty=%d:%d start=%lld end=%lld grid=%lld cpu_us=%lld flips=%d hops=%d samples=",
			   name, getpid(), nice0, renice_at, nice1, duty_spin, duty_sleep, start, end, grid, cpu / 1000, flips, hops);
	for (int i = 0; i < nsamp; i++) len += snprintf(out + len, cap - len, i ? ",%lld" : "%lld", samp[i]);
	len += snprintf(out + len, cap - len, "\n");
	write(1, out, len);
	return 0;
}
