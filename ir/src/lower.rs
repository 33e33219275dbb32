//! Ops that the IR spells in its own ops (convolutions, bit casts between widths), once here
//! for every frontend: each frontend gives a sink for the ops, and the lowering checks every
//! op's type before it emits it, so a misfit is an error naming it, not an ill-typed program.

use crate::{infer_type, Op, TensorType, TypeError};

/// Where a lowering's ops go: the tracing frontend's recorder, the importer's function
/// builder.
pub trait OpSink {
    type Value;
    type Error;
    fn emit(&mut self, op: Op, args: &[&Self::Value]) -> Result<Self::Value, Self::Error>;
}

/// Why an op could not be lowered: its parameters do not fit its operands, or the sink
/// refused an op.
#[derive(Debug)]
pub enum LowerError<E> {
    Invalid(String),
    Sink(E),
}

/// The value a lowering ends with, which it must have emitted itself.
pub(crate) fn finish<V, E>((arg, _): Typed<'_, V>) -> Result<V, LowerError<E>> {
    match arg {
        Arg::Owned(v) => Ok(v),
        Arg::Borrowed(_) => Err(LowerError::Invalid(
            "a lowering must compute a new value".into(),
        )),
    }
}

/// An operand of the lowering: one of the caller's values or one it emitted.
pub(crate) enum Arg<'a, V> {
    Borrowed(&'a V),
    Owned(V),
}

impl<'a, V> From<&'a V> for Arg<'a, V> {
    fn from(v: &'a V) -> Self {
        Arg::Borrowed(v)
    }
}

impl<V> Arg<'_, V> {
    fn get(&self) -> &V {
        match self {
            Arg::Borrowed(v) => v,
            Arg::Owned(v) => v,
        }
    }
}

/// The sink with each value's type alongside, checked by [`infer_type`] before it is emitted.
pub(crate) struct Builder<'s, S> {
    pub(crate) sink: &'s mut S,
}

pub(crate) type Typed<'a, V> = (Arg<'a, V>, TensorType);

impl<S: OpSink> Builder<'_, S> {
    /// `op` of typed operands, its result typed and owned.
    pub(crate) fn emit<'a>(
        &mut self,
        op: Op,
        args: &[&Typed<'_, S::Value>],
    ) -> Result<Typed<'a, S::Value>, LowerError<S::Error>> {
        let types: Vec<&TensorType> = args.iter().map(|a| &a.1).collect();
        let ty =
            infer_type(&op, &types).map_err(|e: TypeError| LowerError::Invalid(e.to_string()))?;
        let values: Vec<&S::Value> = args.iter().map(|a| a.0.get()).collect();
        let v = self.sink.emit(op, &values).map_err(LowerError::Sink)?;
        Ok((Arg::Owned(v), ty))
    }

    /// `x` transposed by `perm`, or `x` itself for the identity.
    pub(crate) fn transpose<'a>(
        &mut self,
        x: Typed<'a, S::Value>,
        perm: Vec<usize>,
    ) -> Result<Typed<'a, S::Value>, LowerError<S::Error>> {
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Ok(x);
        }
        self.emit(Op::Transpose { perm }, &[&x])
    }

    /// `x` reshaped to `shape`, or `x` itself if it has that shape.
    pub(crate) fn reshape<'a>(
        &mut self,
        x: Typed<'a, S::Value>,
        shape: Vec<usize>,
    ) -> Result<Typed<'a, S::Value>, LowerError<S::Error>> {
        if x.1.dims() == shape.as_slice() {
            return Ok(x);
        }
        self.emit(
            Op::Reshape {
                shape: shape.into(),
            },
            &[&x],
        )
    }
}
