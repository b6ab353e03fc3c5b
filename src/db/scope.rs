//! The shops a statement covers: the caller's company, narrowed by a key's shop list and by
//! `filter[shop_id]` (resolved on the HTTP side by `crate::scope`).

use super::Query;

/// `SELECT {columns} FROM {table}`: the company's row `id` (`$1` company, `$2` id). The one way a
/// store reads a row by its id, so none reads it without its company.
pub fn company_row(columns: &str, table: &str, company_id: i64, id: i64) -> Query {
    Query::new(format!("SELECT {columns} FROM {table} WHERE company_id = $1 AND id = $2")).bind(company_id).bind(id)
}

/// The shops a list query covers.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ShopFilter {
    /// Every shop of the caller's company.
    #[default]
    All,
    Only(Vec<i64>),
}

impl ShopFilter {
    /// Appends ` AND <column> IN (...)` when the filter narrows anything.
    pub fn push_sql(&self, q: &mut Query, column: &str) {
        if let ShopFilter::Only(ids) = self {
            if ids.is_empty() {
                q.push(" AND 1 = 0");
            } else {
                q.push(" AND ").push(column).push(" IN ").push_in_list(ids);
            }
        }
    }

    /// `SELECT {columns} FROM {table}`: the company's rows in these shops, in `order`.
    pub fn rows(&self, columns: &str, table: &str, company_id: i64, order: &str) -> Query {
        let mut q = Query::new(format!("SELECT {columns} FROM {table} WHERE company_id = $1")).bind(company_id);
        self.push_sql(&mut q, "shop_id");
        q.push(" ORDER BY ").push(order);
        q
    }
}
