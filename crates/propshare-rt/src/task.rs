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

use std::cell::{Cell, OnceCell, RefCell};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::ops::Deref;
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

/// What each task carries in its `async-task` header: its group, the one
/// `Arc` clone per task; the task's [`TaskGuard`] and its schedule
/// function ([`schedule`]) borrow it.
///
/// Dropped when async-task frees the task: on a worker in a slice, that is
/// right after the task ran, once per task, while the spawner clones the
/// same `Arc` once per task, so the reference count's cache line would
/// move between them twice per task. On a worker the drop is deferred
/// instead ([`Deferred`]) and done in a batch at the end of the slice (or
/// every [`Deferred::BATCH`] tasks): the line moves about once per batch.
/// Nothing reads the count; the group lives at most one slice longer.
pub(crate) struct Meta(ManuallyDrop<Arc<GroupInner>>);

impl Deref for Meta {
    type Target = Arc<GroupInner>;

    fn deref(&self) -> &Arc<GroupInner> {
        &self.0
    }
}

impl Drop for Meta {
    fn drop(&mut self) {
        // SAFETY: `self.0` is not used again: this is its drop.
        let group = unsafe { ManuallyDrop::take(&mut self.0) };
        Deferred::release(group);
    }
}

/// A worker's group references whose drop waits for the end of its slice
/// (see [`Meta`]); `None` outside a slice and on other threads.
pub(crate) struct Deferred;

thread_local! {
    static DEFERRED: RefCell<Option<Vec<Arc<GroupInner>>>> = const { RefCell::new(None) };
}

impl Deferred {
    /// Flush after this many.
    const BATCH: usize = 1024;

    /// From now on this thread defers [`Meta`] drops (a slice starts).
    pub(crate) fn start() {
        DEFERRED.with_borrow_mut(|d| {
            d.get_or_insert_with(|| Vec::with_capacity(Self::BATCH));
        });
    }

    /// Drop what was deferred; `stop`: and defer no more (the slice ends).
    /// No drop runs while the cell is borrowed: a drop can free a group,
    /// whose queue can hold tasks whose `Meta` drops come back here.
    pub(crate) fn flush(stop: bool) {
        let Some(mut batch) = DEFERRED.with_borrow_mut(|d| d.take()) else {
            return;
        };
        batch.clear();
        if !stop {
            // Deferred during the drops above (none, as the cell was
            // empty then): dropped here, outside the borrow.
            let later = DEFERRED.with_borrow_mut(|d| d.replace(batch));
            drop(later);
        }
    }

    fn release(group: Arc<GroupInner>) {
        // `try_with`: a worker's thread-local may be gone when the last
        // drops come from its own destructor; then drop at once.
        let kept = DEFERRED.try_with(|d| match &mut *d.borrow_mut() {
            Some(batch) => {
                batch.push(group);
                Ok(batch.len() >= Self::BATCH)
            }
            None => Err(group),
        });
        match kept {
            Ok(Ok(full)) => {
                if full {
                    Self::flush(false);
                }
            }
            Ok(Err(group)) => drop(group),
            Err(_) => {} // the closure did not run: `group` was dropped with it
        }
    }
}

/// A ready task in a group's queue.
pub(crate) type Runnable = async_task::Runnable<Meta>;

/// Counts a task once, however it ends (see the module doc). It borrows the
/// group from the task's own header ([`Meta`]), which outlives the future
/// it sits in: async-task drops the future before it frees the header.
pub(crate) struct TaskGuard<'a> {
    group: &'a Arc<GroupInner>,
    done: bool,
}

impl<'a> TaskGuard<'a> {
    fn new(group: &'a Arc<GroupInner>) -> TaskGuard<'a> {
        TaskGuard { group, done: false }
    }

    fn finish(&mut self, ok: bool) {
        self.done = true;
        self.group.count_finished(ok);
    }
}

impl Drop for TaskGuard<'_> {
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
async fn wrap<F: Future>(fut: F, mut guard: TaskGuard<'_>) -> Outcome<F::Output> {
    let out = AssertUnwindSafe(fut).catch_unwind().await;
    guard.finish(out.is_ok());
    out
}

/// A new task of `group` running `fut`, not yet scheduled.
pub(crate) fn spawn<F>(group: Arc<GroupInner>, fut: F) -> (Runnable, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let builder = async_task::Builder::new().metadata(Meta(ManuallyDrop::new(group)));
    // SAFETY: `spawn_unchecked` drops only the `Send` and `'static` checks
    // of `spawn`. The future is `Send` (`fut` is, and the guard holds a
    // `&Arc<GroupInner>`, `GroupInner` being `Sync`), and what it borrows
    // is the task's own metadata, which async-task keeps until it frees
    // the task, after dropping the future; the schedule function is a
    // plain `fn`, `Send`, `Sync` and `'static`.
    let (runnable, task) =
        unsafe { builder.spawn_unchecked(move |group: &Meta| wrap(fut, TaskGuard::new(group)), schedule) };
    (runnable, JoinHandle::new(task.fallible()))
}

/// async-task's schedule hook: a new or woken task is ready. A plain `fn`
/// (no captures), so async-task makes no temporary waker around the call;
/// the one taken here keeps the task, and so the group in its header, alive
/// while the group's [`GroupInner::schedule`] looks at its state after the
/// push (a worker may run and free the task as soon as it is queued).
fn schedule(r: Runnable) {
    let alive = r.waker();
    let group: *const Arc<GroupInner> = &**r.metadata();
    // SAFETY: `alive` holds a reference to the task until the end of this
    // function, so its header, and the metadata in it, are not freed.
    GroupInner::schedule(unsafe { &*group }, r);
    drop(alive);
}

/// The handle of a spawned task: `join()` blocks for its result, or
/// `.await` it. It always resolves: `Ok(value)`, or
/// [`JoinError::Panicked`] with the payload, or [`JoinError::Cancelled`].
/// Dropping it detaches the task (it still runs).
///
/// Do not `join()` a task from inside a task of the same runtime when
/// every worker might be doing the same: the worker blocks in `join`.
pub struct JoinHandle<T> {
    task: Option<FallibleTask<Outcome<T>, Meta>>,
}

impl<T> JoinHandle<T> {
    fn new(task: FallibleTask<Outcome<T>, Meta>) -> JoinHandle<T> {
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
