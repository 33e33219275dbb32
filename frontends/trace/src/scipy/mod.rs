//! `jax.scipy`: the special functions ([`special`]) and probability densities ([`stats`])
//! that models and losses reach for, composed from the elementwise ops and the linear
//! algebra, so autodiff, `vmap` and every backend need nothing new.

pub mod special;
pub mod stats;
