//! Tasks: `async-task` runnables in a group's queue, a handle that always
//! resolves, and the cooperative yield points.
//!
//! Every task, closure or future, is one `async_task` task whose future is
//! the user's work wrapped in `catch_unwind` and a [`TaskGuard`]. The guard
//! is what makes "nothing lost" checkable: it is dropped exactly once, when
//! the future is dropped, either after it finished (counted completed or
//! panicked) or unfinished (counted cancelled: its `Runnable` was dropped
//! unrun by a cancel, or after shutdown). Its handle then resolves `Ok`,
//! `Panicked` or `Cancelled` respectively ([`async_task::FallibleTask`]
//! gives `None` for the last).

use std::cell::{Cell, OnceCell};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use async_task::FallibleTask;
use futures_lite::FutureExt;

use crate::error::JoinError;
use crate::runtime::GroupInner;

/// A task's outcome inside async-task: its value or its panic payload.
pub(crate) type Outcome<T> = Result<T, Box<dyn std::any::Any + Send>>;

/// Counts a task once, however it ends (see the module doc).
pub(crate) struct TaskGuard {
    group: Arc<GroupInner>,
    done: bool,
}

impl TaskGuard {
    pub fn new(group: Arc<GroupInner>) -> TaskGuard {
        TaskGuard { group, done: false }
    }

    fn finish(&mut self, ok: bool) {
        self.done = true;
        self.group.count_finished(ok);
    }
}

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if !self.done {
            self.group.count_cancelled();
        }
        self.group.task_gone();
    }
}

/// The future a task runs: `fut` under `catch_unwind`, counted by `guard`.
/// (An `async fn` moves its arguments into the future at the call, so the
/// guard is dropped with the future even if it is never polled.)
pub(crate) async fn wrap<F: Future>(fut: F, mut guard: TaskGuard) -> Outcome<F::Output> {
    let out = AssertUnwindSafe(fut).catch_unwind().await;
    guard.finish(out.is_ok());
    out
}

/// The handle of a spawned task: `join()` blocks for its result, or
/// `.await` it. It always resolves: `Ok(value)`, or
/// [`JoinError::Panicked`] with the payload, or [`JoinError::Cancelled`].
/// Dropping it detaches the task (it still runs).
///
/// Do not `join()` a task from inside a task of the same runtime when
/// every worker might be doing the same: the worker blocks in `join`.
pub struct JoinHandle<T> {
    task: Option<FallibleTask<Outcome<T>>>,
}

impl<T> JoinHandle<T> {
    pub(crate) fn new(task: FallibleTask<Outcome<T>>) -> JoinHandle<T> {
        JoinHandle { task: Some(task) }
    }

    /// Block this thread until the task ends.
    pub fn join(self) -> Result<T, JoinError> {
        futures_lite::future::block_on(self)
    }

    /// Whether the task has ended (its result is ready).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(|t| t.is_finished())
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let task = self.task.as_mut().expect("JoinHandle polled after it resolved");
        match Pin::new(task).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(out) => {
                self.task = None;
                Poll::Ready(match out {
                    Some(Ok(v)) => Ok(v),
                    Some(Err(payload)) => Err(JoinError::Panicked(payload)),
                    None => Err(JoinError::Cancelled),
                })
            }
        }
    }
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.detach();
        }
    }
}

thread_local! {
    /// The current slice's deadline, on a worker thread running a slice.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// This worker's "preempt me" flag, set by a wake-up's kick.
    static KICKED: OnceCell<Arc<AtomicBool>> = const { OnceCell::new() };
}

pub(crate) fn set_deadline(d: Option<Instant>) {
    DEADLINE.with(|c| c.set(d));
}

pub(crate) fn set_kick_flag(flag: Arc<AtomicBool>) {
    KICKED.with(|k| {
        let _ = k.set(flag);
    });
}

/// Whether the running task should return soon: its worker's slice is
/// used up, or a wake-up asked this worker to yield. One monotonic clock
/// read (about 25 ns) and one relaxed load; false outside a worker.
///
/// The runtime cannot split a closure: a long closure should check this in
/// its loop and, when true, spawn the rest of its work and return.
pub fn need_yield() -> bool {
    DEADLINE.with(|d| d.get().is_some_and(|d| Instant::now() >= d))
        || KICKED.with(|k| k.get().is_some_and(|k| k.load(Ordering::Relaxed)))
}

/// Yield once: the task goes to the back of its group's queue, and the
/// worker ends the slice if it is used up.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// Yield only if [`need_yield`] says so.
pub async fn yield_if_needed() {
    if need_yield() {
        yield_now().await;
    }
}

/// The future of [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
