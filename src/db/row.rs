//! Decoding rows of either backend into the types features use.
//!
//! A row type derives [`FromRow`] (`autoshop_macros`): its fields are read in declaration order,
//! one column each, so a `SELECT` lists its columns in the order of the struct's fields. Debug
//! builds check every column's name against the field it fills, so a statement and its row type
//! cannot drift apart unnoticed (the test suite runs in debug).

use sqlx::{Postgres, Row as _, postgres::PgRow};

use super::DbError;

/// A value of one column, on either backend.
pub trait Decode: Sized {
    fn from_sqlite(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self>;
    fn from_postgres(row: &PgRow, index: usize) -> Result<Self, sqlx::Error>;
}

impl<T> Decode for T
where
    T: rusqlite::types::FromSql + for<'r> sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    fn from_sqlite(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        T::column_result(value)
    }

    fn from_postgres(row: &PgRow, index: usize) -> Result<Self, sqlx::Error> {
        row.try_get(index)
    }
}

/// A row type: built from the next columns of a [`RowReader`].
pub trait FromRow: Sized + Send + 'static {
    fn from_row(row: &mut RowReader<'_>) -> Result<Self, DbError>;
}

enum Source<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a PgRow),
}

/// The columns of one row, read left to right.
pub struct RowReader<'a> {
    source: Source<'a>,
    next: usize,
}

impl<'a> RowReader<'a> {
    pub(super) fn sqlite(row: &'a rusqlite::Row<'a>) -> Self {
        RowReader { source: Source::Sqlite(row), next: 0 }
    }

    pub(super) fn postgres(row: &'a PgRow) -> Self {
        RowReader { source: Source::Postgres(row), next: 0 }
    }

    /// The next column, which the statement names `name`.
    pub fn get<T: Decode>(&mut self, name: &'static str) -> Result<T, DbError> {
        let index = self.next;
        self.next += 1;
        #[cfg(debug_assertions)]
        self.check_name(index, name);
        match self.source {
            Source::Sqlite(row) => {
                let value = row.get_ref(index).map_err(|e| DbError::Other(format!("column {index} ({name}): {e}")))?;
                T::from_sqlite(value).map_err(|e| DbError::Other(format!("column {index} ({name}): {e}")))
            }
            Source::Postgres(row) => T::from_postgres(row, index).map_err(|e| DbError::Other(format!("column {index} ({name}): {e}"))),
        }
    }

    #[cfg(debug_assertions)]
    fn check_name(&self, index: usize, name: &str) {
        let actual = match self.source {
            Source::Sqlite(row) => row.as_ref().column_name(index).map(str::to_owned).ok(),
            Source::Postgres(row) => sqlx::Row::columns(row).get(index).map(|c| sqlx::Column::name(c).to_owned()),
        };
        // Unnamed expressions (`SELECT COUNT(*)`) decode into tuples, which pass an empty name.
        if !name.is_empty() {
            assert_eq!(actual.as_deref(), Some(name), "column {index} of the statement does not match the row type's field");
        }
    }
}

macro_rules! tuple_rows {
    ($($t:ident),+) => {
        impl<$($t: Decode + Send + 'static),+> FromRow for ($($t,)+) {
            fn from_row(row: &mut RowReader<'_>) -> Result<Self, DbError> {
                Ok(($(row.get::<$t>("")?,)+))
            }
        }
    };
}

tuple_rows!(A);
tuple_rows!(A, B);
tuple_rows!(A, B, C);
tuple_rows!(A, B, C, D);
tuple_rows!(A, B, C, D, E);
