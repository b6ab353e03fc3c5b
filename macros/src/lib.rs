//! `#[derive(FromRow)]`: decodes a struct from a database row, column by column in field order.
//!
//! A field marked `#[row(flatten)]` is a struct that derives `FromRow` itself and takes the
//! next columns, so a row can be written as `id + fields + timestamps`.

use proc_macro::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, parse_macro_input};

#[proc_macro_derive(FromRow, attributes(row))]
pub fn derive_from_row(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(input, "FromRow is derived for structs only"));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(input, "FromRow needs named fields"));
    };
    let mut inits = Vec::new();
    for field in &fields.named {
        let name = field.ident.as_ref().expect("named field");
        let ty = &field.ty;
        let mut flatten = false;
        for attr in field.attrs.iter().filter(|a| a.path().is_ident("row")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("flatten") {
                    flatten = true;
                    Ok(())
                } else {
                    Err(meta.error("unknown row attribute; expected `flatten`"))
                }
            })?;
        }
        let column = name.to_string();
        inits.push(if flatten {
            quote! { #name: <#ty as ::autoshop::db::FromRow>::from_row(row)? }
        } else {
            quote! { #name: row.get::<#ty>(#column)? }
        });
    }
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    Ok(quote! {
        impl #impl_generics ::autoshop::db::FromRow for #ident #ty_generics #where_clause {
            fn from_row(row: &mut ::autoshop::db::RowReader<'_>) -> ::core::result::Result<Self, ::autoshop::db::DbError> {
                ::core::result::Result::Ok(#ident { #(#inits),* })
            }
        }
    })
}
