//! The shops a statement covers: the caller's company, narrowed by a key's shop list and by
//! `filter[shop_id]` (resolved on the HTTP side by `crate::scope`).

use super::Query;

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
}
