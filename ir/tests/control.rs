//! `while` and `cond`: the text format round-trips them (regions inline), the shape rules
//! name the carried value or branch at fault, and serde keeps them.
#![allow(clippy::unwrap_used)]

use ferrax_ir::{parse_func, print_func, verify, Func};

fn round_trip(src: &str) -> Func {
    let f = parse_func(src).unwrap_or_else(|e| panic!("{e}\n{src}"));
    verify(&f).unwrap();
    let printed = print_func(&f);
    let again = parse_func(&printed).unwrap();
    assert_eq!(again, f);
    assert_eq!(print_func(&again), printed);
    let json = serde_json::to_string(&f).unwrap();
    assert_eq!(serde_json::from_str::<Func>(&json).unwrap(), f);
    f
}

const LOOP: &str = "
func @count(%n: i32[], %x: f32[3]) -> (i32[], f32[3]) {
  %i = while %n, %x, result=0, cond=func @c(%i: i32[], %x: f32[3]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f32[3]) -> (i32[], f32[3]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %y = add %x, %x : f32[3]
      return %j, %y
    } : i32[]
  %y = while %n, %x, result=1, cond=func @c(%i: i32[], %x: f32[3]) -> (bool[]) {
      %z = constant 0 : i32[]
      %p = gt %i, %z : bool[]
      return %p
    }, body=func @b(%i: i32[], %x: f32[3]) -> (i32[], f32[3]) {
      %one = constant 1 : i32[]
      %j = sub %i, %one : i32[]
      %y = add %x, %x : f32[3]
      return %j, %y
    } : f32[3]
  return %i, %y
}";

const SWITCH: &str = "
func @pick(%k: i32[], %p: bool[], %x: f32[2]) -> (f32[2], f32[]) {
  %a = cond %k, %x, result=0, branches=[func @b0(%x: f32[2]) -> (f32[2], f32[]) {
      %s = reduce_sum %x, axes=[0] : f32[]
      return %x, %s
    }, func @b1(%x: f32[2]) -> (f32[2], f32[]) {
      %e = exp %x : f32[2]
      %s = reduce_max %e, axes=[0] : f32[]
      return %e, %s
    }, func @b2(%x: f32[2]) -> (f32[2], f32[]) {
      %n = neg %x : f32[2]
      %s = reduce_min %n, axes=[0] : f32[]
      return %n, %s
    }] : f32[2]
  %b = cond %p, %a, result=1, branches=[func @f(%x: f32[2]) -> (f32[2], f32[]) {
      %s = reduce_sum %x, axes=[0] : f32[]
      return %x, %s
    }, func @t(%x: f32[2]) -> (f32[2], f32[]) {
      %s = reduce_prod %x, axes=[0] : f32[]
      return %x, %s
    }] : f32[]
  return %a, %b
}";

const SCAN: &str = "
func @rnn(%h: f32[3], %xs: f32[5,3], %w: f32[3,3]) -> (f32[3], f32[5,3]) {
  %last = scan %w, %h, %xs, consts=1, carry=1, length=5, reverse=1, result=0, body=func @step(%w: f32[3,3], %h: f32[3], %x: f32[3]) -> (f32[3], f32[3]) {
      %m = dot_general %w, %h, contract=[1]x[0] : f32[3]
      %a = add %m, %x : f32[3]
      %t = tanh %a : f32[3]
      return %t, %t
    } : f32[3]
  %all = scan %w, %h, %xs, consts=1, carry=1, length=5, reverse=1, result=1, body=func @step(%w: f32[3,3], %h: f32[3], %x: f32[3]) -> (f32[3], f32[3]) {
      %m = dot_general %w, %h, contract=[1]x[0] : f32[3]
      %a = add %m, %x : f32[3]
      %t = tanh %a : f32[3]
      return %t, %t
    } : f32[5,3]
  return %last, %all
}";

#[test]
fn while_and_cond_round_trip() {
    let f = round_trip(LOOP);
    assert_eq!(f.body.len(), 2);
    insta::assert_snapshot!("while", print_func(&f));
    let f = round_trip(SWITCH);
    insta::assert_snapshot!("cond", print_func(&f));
    let f = round_trip(SCAN);
    insta::assert_snapshot!("scan", print_func(&f));
}

fn parse_err(src: &str) -> String {
    parse_func(src)
        .map(|f| print_func(&f))
        .unwrap_err()
        .to_string()
}

/// Each ill-formed call, and the error that names what is wrong.
#[test]
fn shape_rules_name_the_value_or_branch_at_fault() {
    let cases = [
        ("cond takes too few", LOOP.replacen("@c(%i: i32[], %x: f32[3])", "@c(%i: i32[])", 1)),
        ("cond takes another type", LOOP.replacen("@c(%i: i32[], %x: f32[3])", "@c(%i: i32[], %x: f32[2])", 1)),
        ("body changes a carried type", LOOP.replacen(
            "-> (i32[], f32[3]) {\n      %one = constant 1 : i32[]\n      %j = sub %i, %one : i32[]\n      %y = add %x, %x : f32[3]\n      return %j, %y",
            "-> (i32[], f32[]) {\n      %one = constant 1 : i32[]\n      %j = sub %i, %one : i32[]\n      %y = reduce_sum %x, axes=[0] : f32[]\n      return %j, %y", 1)),
        ("cond returns no bool", LOOP.replacen("-> (bool[]) {\n      %z = constant 0 : i32[]\n      %p = gt %i, %z : bool[]\n      return %p", "-> (i32[]) {\n      %z = constant 0 : i32[]\n      return %z", 1)),
        ("result out of range", LOOP.replacen("result=1", "result=2", 1)),
        ("missing body", LOOP.replacen(", body=func @b(", ", bodyx=func @b(", 1)),
        ("branch takes another operand", SWITCH.replacen(
            "@b1(%x: f32[2]) -> (f32[2], f32[]) {\n      %e = exp %x : f32[2]",
            "@b1(%x: f32[3]) -> (f32[3], f32[]) {\n      %e = exp %x : f32[3]", 1)),
        ("branch returns another type", SWITCH.replacen(
            "-> (f32[2], f32[]) {\n      %n = neg %x : f32[2]\n      %s = reduce_min %n, axes=[0] : f32[]\n      return %n, %s",
            "-> (f32[], f32[]) {\n      %n = neg %x : f32[2]\n      %s = reduce_min %n, axes=[0] : f32[]\n      return %s, %s", 1)),
        ("bool picks among 3", SWITCH.replacen("cond %k", "cond %p", 1)),
        ("index of another type", SWITCH.replacen("cond %k, %x", "cond %x, %x", 1)),
        ("no branches", "func @f(%k: i32[]) -> (f32[]) {\n  %a = cond %k, result=0, branches=[] : f32[]\n  return %a\n}".to_string()),
        ("scanned operand without the length", SCAN.replacen("%xs: f32[5,3]", "%xs: f32[4,3]", 1)),
        ("scan body takes a whole operand", "func @f(%xs: f32[5,3]) -> (f32[5,5,3]) {\n  %y = scan %xs, carry=0, length=5, result=0, body=func @b(%x: f32[5,3]) -> (f32[5,3]) {\n      return %x\n    } : f32[5,5,3]\n  return %y\n}".to_string()),
        ("scan carry past the operands", SCAN.replacen("carry=1", "carry=4", 1)),
        ("branches not functions", "func @f(%k: i32[]) -> (f32[]) {\n  %a = cond %k, result=0, branches=[1] : f32[]\n  return %a\n}".to_string()),
    ];
    let table: Vec<String> = cases
        .iter()
        .map(|(what, src)| format!("{what}: {}", parse_err(src)))
        .collect();
    insta::assert_snapshot!(table.join("\n"));
}

/// Loops built in memory nest at most 63 deep, as `custom_vjp` calls do: the shape rule
/// refuses the next level, so passes that follow regions have a bounded depth.
#[test]
fn loops_built_in_memory_nest_a_bounded_depth() {
    use ferrax_ir::{DType, FuncBuilder, Op, TensorType, While};
    let ty = TensorType::new(DType::Bool, Vec::<usize>::new());
    let identity = |name: &str| {
        let mut b = FuncBuilder::new(name);
        let x = b.param(ty.clone());
        b.finish(vec![x])
    };
    let mut body = identity("leaf");
    let mut refused_at = None;
    for depth in 1..=70 {
        let looped = Op::While(Box::new(While {
            cond: identity("cond"),
            body: body.clone(),
            result: 0,
        }));
        let mut b = FuncBuilder::new(format!("level{depth}"));
        let x = b.param(ty.clone());
        match b.push(looped, &[x]) {
            Ok(y) => body = b.finish(vec![y]),
            Err(e) => {
                assert!(e.to_string().contains("nest more than 63"), "{e}");
                refused_at = Some(depth);
                break;
            }
        }
    }
    assert_eq!(refused_at, Some(64));
}
