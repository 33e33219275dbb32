//! `#[derive(Tree)]`: makes a struct of tensors (a model's parameters, say) a pytree, so it
//! can be passed to and returned from `trace`, `jit` and the autodiff transforms.
//!
//! Fields are flattened in declaration order, and key leaves' paths by their names (by
//! position in a tuple struct), so a checkpoint of `Block { attn: Attention { qkv, .. }, .. }`
//! names `attn.qkv.w`. Generated code names the trait through
//! `::ferrax`; inside crates that use `ferrax-trace` directly, write
//! `#[tree(crate = "ferrax_trace")]`.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote};
use syn::ext::IdentExt;
use syn::{parse_macro_input, parse_quote, Data, DeriveInput, Fields, Path};

#[proc_macro_derive(Tree, attributes(tree))]
pub fn derive_tree(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn crate_path(input: &DeriveInput) -> syn::Result<Path> {
    let mut path: Path = parse_quote!(::ferrax);
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("tree")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("crate") {
                let lit: syn::LitStr = meta.value()?.parse()?;
                path = lit.parse()?;
                Ok(())
            } else {
                Err(meta.error("expected `crate = \"...\"`"))
            }
        })?;
    }
    Ok(path)
}

fn expand(mut input: DeriveInput) -> syn::Result<TokenStream2> {
    let krate = crate_path(&input)?;
    let name = input.ident.clone();
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(
            &input.ident,
            "#[derive(Tree)] supports structs only",
        ));
    };
    let fields = data.fields.clone();
    let n = fields.len();
    let keys: Vec<String> = match &fields {
        Fields::Named(named) => named
            .named
            .iter()
            .filter_map(|f| f.ident.as_ref().map(|id| id.unraw().to_string()))
            .collect(),
        _ => (0..n).map(|i| i.to_string()).collect(),
    };
    let (members, construct): (Vec<TokenStream2>, TokenStream2) = match &fields {
        Fields::Named(named) => {
            let idents: Vec<_> = named.named.iter().filter_map(|f| f.ident.clone()).collect();
            let items = idents
                .iter()
                .enumerate()
                .map(|(i, id)| quote!(#id: #krate::Tree::unflatten(&children[#i], leaves)?));
            (
                idents.iter().map(|id| quote!(#id)).collect(),
                quote!(Self { #(#items),* }),
            )
        }
        Fields::Unnamed(unnamed) => {
            let idx: Vec<syn::Index> = (0..unnamed.unnamed.len()).map(syn::Index::from).collect();
            let items =
                (0..idx.len()).map(|i| quote!(#krate::Tree::unflatten(&children[#i], leaves)?));
            (
                idx.iter().map(|i| quote!(#i)).collect(),
                quote!(Self ( #(#items),* )),
            )
        }
        Fields::Unit => (Vec::new(), quote!(Self)),
    };
    for param in input.generics.type_params_mut() {
        param.bounds.push(parse_quote!(#krate::Tree));
    }
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let children_name = format_ident!("children");
    let bind_children = if n == 0 {
        quote!(let _ = def.children(0)?;)
    } else {
        quote!(let #children_name = def.children(#n)?;)
    };
    Ok(quote! {
        impl #impl_generics #krate::Tree for #name #ty_generics #where_clause {
            fn flatten(&self, leaves: &mut ::std::vec::Vec<#krate::Tensor>) -> #krate::TreeDef {
                #krate::TreeDef::Node(::std::vec![
                    #(#krate::Tree::flatten(&self.#members, leaves)),*
                ])
            }

            fn unflatten(
                def: &#krate::TreeDef,
                leaves: &mut dyn ::std::iter::Iterator<Item = #krate::Tensor>,
            ) -> #krate::Result<Self> {
                #bind_children
                ::std::result::Result::Ok(#construct)
            }

            fn key_paths(
                &self,
                prefix: &mut ::std::vec::Vec<::std::string::String>,
                out: &mut ::std::vec::Vec<::std::vec::Vec<::std::string::String>>,
            ) {
                #(
                    prefix.push(::std::string::String::from(#keys));
                    #krate::Tree::key_paths(&self.#members, prefix, out);
                    prefix.pop();
                )*
            }
        }
    })
}
