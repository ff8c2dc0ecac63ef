//! What search index functions name, field by field: `index()` hands each
//! field to the host as it is called (see [`Gathered`]).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use rquickjs::function::This;
use rquickjs::{Ctx, Exception, Function};
use serde_json::Value;

/// What a field is, as the function named it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Nouveau's `text`: analyzed.
    Text,
    /// Nouveau's `string`: one term, sortable and countable.
    String,
    /// Nouveau's `double`: a number, for ranges and sorting.
    Double,
    /// Nouveau's `stored`: only returned.
    Stored,
    /// Clouseau's: typed by its value (a string is analyzed text and a
    /// sortable term; a number a double).
    Auto,
}

/// One `index(...)` call.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedField {
    pub kind: FieldKind,
    pub name: String,
    /// A string or a number (a boolean became `"true"`/`"false"`).
    pub value: Value,
    pub store: bool,
    pub facet: bool,
    /// Clouseau's `{index: false}`: stored (or counted) only.
    pub searchable: bool,
}

/// Per document, per index: its fields, or `None` when the function
/// threw for it (the document is then left out of that index).
pub type IndexedDocs = Vec<Vec<Option<Vec<IndexedField>>>>;

/// The fields one call's index functions name, gathered on the engine's
/// thread as `index()` is called, so that no JSON text comes between the
/// functions and the index (a page of long texts would be quoted and
/// parsed again for nothing). Bounded by the engine's memory limit, as
/// the functions' own values are.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// Functions per document.
    functions: usize,
    /// The running function's fields.
    fields: Vec<IndexedField>,
    /// The current document's, per function so far.
    doc: Vec<Option<Vec<IndexedField>>>,
    docs: IndexedDocs,
    bytes: usize,
    limit: usize,
    overflowed: bool,
}

impl Gathered {
    pub(crate) fn new(limit: usize) -> Gathered {
        Gathered {
            limit,
            ..Gathered::default()
        }
    }

    /// Each document's fields, when all `documents` were gathered within
    /// the bound.
    pub(crate) fn finish(self, documents: usize) -> Result<IndexedDocs, crate::JsError> {
        if self.overflowed {
            return Err(crate::JsError::OutOfMemory);
        }
        if self.docs.len() != documents {
            return Err(crate::JsError::Internal(
                "the index functions answered for another number of documents".into(),
            ));
        }
        Ok(self.docs)
    }

    fn field(&mut self, field: IndexedField) {
        let size = FIELD_OVERHEAD
            + field.name.len()
            + field.value.as_str().map(str::len).unwrap_or_default();
        self.bytes = self.bytes.saturating_add(size);
        if self.bytes > self.limit {
            self.overflowed = true;
        } else {
            self.fields.push(field);
        }
    }

    /// The running function ended: its fields are the document's entry
    /// in its index when it returned, none when it threw.
    fn done(&mut self, document: usize, kept: bool) -> Result<(), &'static str> {
        if document != self.docs.len() {
            return Err("index functions ended out of order");
        }
        let fields = std::mem::take(&mut self.fields);
        self.doc.push(kept.then_some(fields));
        if self.doc.len() >= self.functions {
            self.docs.push(std::mem::take(&mut self.doc));
        }
        Ok(())
    }
}

/// What a field costs beside its text, for the memory bound.
const FIELD_OVERHEAD: usize = 64;

/// The host's side of `index()`: `__couch_index_begin(functions)`,
/// `__couch_index_field(kind, name, value, store, facet, searchable)` and
/// `__couch_index_done(document, kept)`, which the prelude takes for
/// itself (design functions cannot reach them).
pub(crate) fn install(
    ctx: &Ctx<'_>,
    slot: Rc<RefCell<Option<Arc<Mutex<Gathered>>>>>,
) -> rquickjs::Result<()> {
    let gathering = slot.clone();
    let begin = Function::new(ctx.clone(), move |functions: usize| {
        with_gathered(&gathering, |g| {
            *g = Gathered {
                functions: functions.max(1),
                ..Gathered::new(g.limit)
            };
        });
    })?;
    let gathering = slot.clone();
    let field = Function::new(
        ctx.clone(),
        move |kind: String,
              name: String,
              value: rquickjs::Value<'_>,
              store: bool,
              facet: bool,
              searchable: bool|
              -> rquickjs::Result<()> {
            let kind = match kind.as_str() {
                "text" => FieldKind::Text,
                "string" => FieldKind::String,
                "double" => FieldKind::Double,
                "stored" => FieldKind::Stored,
                _ => FieldKind::Auto,
            };
            let value = if let Some(text) = value.as_string() {
                Value::String(utf8(text)?)
            } else {
                value.as_number().map(number_value).unwrap_or(Value::Null)
            };
            with_gathered(&gathering, |g| {
                g.field(IndexedField {
                    kind,
                    name,
                    value,
                    store,
                    facet,
                    searchable,
                })
            });
            Ok(())
        },
    )?;
    let gathering = slot;
    let done = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'_>, document: usize, kept: bool| -> rquickjs::Result<()> {
            let ended = with_gathered(&gathering, |g| g.done(document, kept));
            match ended {
                Some(Err(message)) => Err(Exception::throw_internal(&ctx, message)),
                _ => Ok(()),
            }
        },
    )?;
    let globals = ctx.globals();
    globals.set("__couch_index_begin", begin)?;
    globals.set("__couch_index_field", field)?;
    globals.set("__couch_index_done", done)?;
    Ok(())
}

/// A string as UTF-8; lone surrogates (which have none) become U+FFFD, as
/// in a JSON text of it read back.
fn utf8(text: &rquickjs::String<'_>) -> rquickjs::Result<String> {
    match text.to_string() {
        Ok(text) => Ok(text),
        Err(_) => {
            let string: rquickjs::Object = text.ctx().globals().get("String")?;
            let prototype: rquickjs::Object = string.get("prototype")?;
            let well_formed: Function = prototype.get("toWellFormed")?;
            let fixed: rquickjs::String = well_formed.call((This(text.clone()),))?;
            fixed.to_string()
        }
    }
}

/// A number as `JSON.stringify` writes it and CouchDB reads it back: an
/// integer when it has no fraction, null for NaN and the infinities (no
/// JSON number, so nothing to index).
fn number_value(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 9.2e18 {
        return Value::from(n as i64);
    }
    serde_json::Number::from_f64(n)
        .map(Value::Number)
        .unwrap_or(Value::Null)
}

/// Runs `work` on the running call's gathering, when it gathers.
fn with_gathered<T>(
    slot: &Rc<RefCell<Option<Arc<Mutex<Gathered>>>>>,
    work: impl FnOnce(&mut Gathered) -> T,
) -> Option<T> {
    let slot = slot.borrow();
    let gathered = slot.as_ref()?;
    let mut gathered = gathered.lock().unwrap_or_else(|p| p.into_inner());
    Some(work(&mut gathered))
}
