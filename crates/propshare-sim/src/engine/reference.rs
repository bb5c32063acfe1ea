//! The reference a run measures lag against: the flat fluid
//! ([`crate::fluid::Fluid`]) or, for a run with groups, the hierarchical one
//! ([`crate::hier::HierFluid`]). One branch per call; the flat path does
//! exactly what it did before groups existed.

use propshare::groups::GroupId;
use propshare::{ClientId, Time, Weight};

use crate::fluid::{Fluid, Service};
use crate::hier::HierFluid;

pub(super) enum Reference {
    Flat(Fluid),
    Hier(Box<HierFluid>),
}

impl Reference {
    /// Client `c` joins group `g` (ignored by the flat reference).
    #[inline]
    pub(super) fn join(&mut self, now: Time, c: ClientId, g: GroupId, w: Weight) {
        match self {
            Reference::Flat(f) => f.join(now, c, w),
            // The engine's groups are validated when the tree is built.
            Reference::Hier(h) => h.join(now, c, g, w).expect("a client joins a group of the tree"),
        }
    }

    #[inline]
    pub(super) fn leave(&mut self, now: Time, c: ClientId) -> Service {
        match self {
            Reference::Flat(f) => f.leave(now, c),
            Reference::Hier(h) => h.leave(now, c),
        }
    }

    #[inline]
    pub(super) fn block(&mut self, now: Time, c: ClientId) {
        match self {
            Reference::Flat(f) => f.block(now, c),
            Reference::Hier(h) => h.block(now, c),
        }
    }

    #[inline]
    pub(super) fn wake(&mut self, now: Time, c: ClientId) {
        match self {
            Reference::Flat(f) => f.wake(now, c),
            Reference::Hier(h) => h.wake(now, c),
        }
    }

    #[inline]
    pub(super) fn set_weight(&mut self, now: Time, c: ClientId, w: Weight) {
        match self {
            Reference::Flat(f) => f.set_weight(now, c, w),
            Reference::Hier(h) => h.set_weight(now, c, w),
        }
    }

    #[inline]
    pub(super) fn ideal(&mut self, now: Time, c: ClientId) -> Service {
        match self {
            Reference::Flat(f) => f.ideal(now, c),
            Reference::Hier(h) => h.ideal(now, c),
        }
    }

    /// Client `c`'s rate as (num, den): the flat reference only (service
    /// error is measured for static sets, and a run with groups is not one).
    #[inline]
    pub(super) fn rate(&self, c: ClientId) -> (u64, u64) {
        match self {
            Reference::Flat(f) => f.rate(c),
            Reference::Hier(_) => (0, 1),
        }
    }
}
