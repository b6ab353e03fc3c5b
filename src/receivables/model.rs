//! Accounts receivable wire types.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::store::{PaymentRow, ReceivableRow};
use crate::body::{present, serialize_money};

/// An accounts receivable entry (an invoice owed by the customer).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Receivable {
    pub id: i64,
    pub customer_id: i64,
    pub shop_id: i64,
    pub reference: String,
    pub repair_order_id: Option<i64>,
    /// Invoice date, `YYYY-MM-DD`.
    pub date: String,
    pub due_date: String,
    /// Posting date (defaults to `date`).
    pub actual_date: String,
    #[serde(serialize_with = "serialize_money")]
    #[schema(value_type = f64, example = 125.5)]
    pub amount: i64,
    /// What remains to be paid.
    #[serde(serialize_with = "serialize_money")]
    #[schema(value_type = f64, example = 25.5)]
    pub balance: i64,
    /// `balance == 0`.
    pub paid: bool,
    /// Date of the latest payment; null when none.
    pub payment_date: Option<String>,
}

impl From<ReceivableRow> for Receivable {
    fn from(row: ReceivableRow) -> Self {
        let r = row.fields;
        Receivable {
            id: row.id,
            customer_id: row.customer_id,
            shop_id: r.shop_id,
            reference: r.reference,
            repair_order_id: r.repair_order_id,
            date: r.date,
            due_date: r.due_date,
            actual_date: r.actual_date,
            amount: r.amount,
            balance: row.balance,
            paid: row.balance == 0,
            payment_date: row.payment_date,
        }
    }
}

/// A payment on an accounts receivable entry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AccountPayment {
    pub id: i64,
    pub accounts_receivable_id: i64,
    #[serde(serialize_with = "serialize_money")]
    #[schema(value_type = f64, example = 100.0)]
    pub amount: i64,
    /// `YYYY-MM-DD`.
    pub date: String,
}

impl From<PaymentRow> for AccountPayment {
    fn from(r: PaymentRow) -> Self {
        AccountPayment { id: r.id, accounts_receivable_id: r.accounts_receivable_id, amount: r.amount, date: r.date }
    }
}

/// Body of `POST /api/v1/customers/{customer_id}/accounts_receivable` (admin).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ReceivableInput {
    /// A shop of the company the key may see.
    #[schema(value_type = i64, required = true)]
    #[serde(default, deserialize_with = "present")]
    pub shop_id: Option<Value>,
    #[schema(value_type = String, required = true, max_length = 255, pattern = r"\S")]
    #[serde(default, deserialize_with = "present")]
    pub reference: Option<Value>,
    #[schema(value_type = Option<i64>)]
    #[serde(default, deserialize_with = "present")]
    pub repair_order_id: Option<Value>,
    /// Invoice date, `YYYY-MM-DD`.
    #[schema(value_type = chrono::NaiveDate, required = true)]
    #[serde(default, deserialize_with = "present")]
    pub date: Option<Value>,
    /// `YYYY-MM-DD`, not before `date`.
    #[schema(value_type = chrono::NaiveDate, required = true)]
    #[serde(default, deserialize_with = "present")]
    pub due_date: Option<Value>,
    /// Posting date, `YYYY-MM-DD`; defaults to `date`.
    #[schema(value_type = Option<chrono::NaiveDate>)]
    #[serde(default, deserialize_with = "present")]
    pub actual_date: Option<Value>,
    #[schema(schema_with = crate::schemas::amount, required = true)]
    #[serde(default, deserialize_with = "present")]
    pub amount: Option<Value>,
}

/// Body of `POST .../accounts_receivable/{id}/payments` (admin).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct PaymentInput {
    /// More than 0, at most two decimals, and at most the entry's balance.
    #[schema(schema_with = crate::schemas::amount, required = true)]
    #[serde(default, deserialize_with = "present")]
    pub amount: Option<Value>,
    /// `YYYY-MM-DD`.
    #[schema(value_type = chrono::NaiveDate, required = true)]
    #[serde(default, deserialize_with = "present")]
    pub date: Option<Value>,
}

/// Query parameters of `GET /api/v1/customers/{customer_id}/accounts_receivable`. Dates are
/// `YYYY-MM-DD`; every range bound is inclusive.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct ReceivableListParams {
    #[param(minimum = 1)]
    page: Option<i64>,
    /// Items per page, 1 to 100 (default 10).
    #[param(rename = "pageSize", minimum = 1, maximum = 100)]
    page_size: Option<i64>,
    /// `reference`, `due_date`, `date` or `actual_date` (comma-separated for several); prefix
    /// `-` for descending.
    #[param(pattern = r"^([-+]?(reference|due_date|date|actual_date)(,[-+]?(reference|due_date|date|actual_date))*)?$")]
    sort: Option<String>,
    /// `true`: balance is 0; `false`: something is owed.
    #[param(rename = "filter[paid]")]
    filter_paid: Option<bool>,
    /// Invoice date from.
    #[param(rename = "filter[ar_date_start]", value_type = Option<chrono::NaiveDate>)]
    filter_ar_date_start: Option<String>,
    /// Invoice date to.
    #[param(rename = "filter[ar_date_end]", value_type = Option<chrono::NaiveDate>)]
    filter_ar_date_end: Option<String>,
    #[param(rename = "filter[ar_due_date_start]", value_type = Option<chrono::NaiveDate>)]
    filter_ar_due_date_start: Option<String>,
    #[param(rename = "filter[ar_due_date_end]", value_type = Option<chrono::NaiveDate>)]
    filter_ar_due_date_end: Option<String>,
    /// Date of the latest payment from (entries without a payment never match).
    #[param(rename = "filter[payment_date_start]", value_type = Option<chrono::NaiveDate>)]
    filter_payment_date_start: Option<String>,
    #[param(rename = "filter[payment_date_end]", value_type = Option<chrono::NaiveDate>)]
    filter_payment_date_end: Option<String>,
    /// Posting date from.
    #[param(rename = "filter[ar_actual_date_start]", value_type = Option<chrono::NaiveDate>)]
    filter_ar_actual_date_start: Option<String>,
    #[param(rename = "filter[ar_actual_date_end]", value_type = Option<chrono::NaiveDate>)]
    filter_ar_actual_date_end: Option<String>,
    /// Exact.
    #[param(rename = "filter[reference]")]
    filter_reference: Option<String>,
    /// Exact.
    #[param(rename = "filter[repair_order_id]")]
    filter_repair_order_id: Option<i64>,
    /// The entry's shop; outside the key's scope answers 404.
    #[param(rename = "filter[shop_id]")]
    filter_shop_id: Option<i64>,
}
