//! Schema evolution planner: (current table schema, new source schema) → the compatible
//! changes and the next table schema, or an incompatible verdict with the reason.
//!
//! Follows Iceberg's rules. Fields are matched by name at every nesting level; a matched
//! field keeps its id forever. Allowed:
//! - a new field → a new column with a fresh id (optional, unless the table is new);
//! - `int → long`, `float → double`, `decimal(p, s) → decimal(p', s)` with `p' > p`:
//!   promotions keeping the field id;
//! - a field gone from the source → the column stays, optional, null from then on;
//! - a required column the source makes optional → the column becomes optional.
//!
//! A source type narrower than its column (`int` for a `long` column, `float` for a
//! `double`, a decimal of lower precision) changes nothing: the column never narrows and
//! holds the values as they are (an old writer schema after a promotion, or a producer
//! that narrowed its own).
//!
//! Incompatible (the table is suspended, nothing is lost): any other type change, a
//! required field added to an existing table, a map key type change.
//!
//! Source schemas are built with placeholder ids (0); the planner assigns every id. A new
//! column's id is above the table's last-column-id ([`plan_above`]): an id another engine
//! dropped is never given again, so older files' values of a dropped column stay dropped
//! when a field of its name comes back.

use std::sync::Arc;

use iceberg::spec::{ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type};

/// One compatible change.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    AddColumn { path: String, id: i32, field_type: String },
    Promote { path: String, id: i32, from: String, to: String },
    MakeOptional { path: String, id: i32 },
}

/// Why a source schema cannot be applied to the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("incompatible schema change at `{path}`: {reason}")]
pub struct Incompatible {
    pub path: String,
    pub reason: String,
}

/// The planned next schema.
#[derive(Debug, Clone)]
pub struct Evolution {
    /// The table schema after the changes (the current one when `changes` is empty).
    pub schema: Schema,
    pub changes: Vec<Change>,
}

/// Plans how `source` applies to `current` (`None`: a new table, schema id 0), new
/// columns numbered above the schema's highest id.
pub fn plan(current: Option<&Schema>, source: &StructType) -> Result<Evolution, Incompatible> {
    plan_above(current, 0, source)
}

/// [`plan`], new columns numbered above `last_column_id` too (the table metadata's: the
/// highest id any of its schemas ever gave, dropped columns' included).
pub fn plan_above(
    current: Option<&Schema>,
    last_column_id: i32,
    source: &StructType,
) -> Result<Evolution, Incompatible> {
    let highest = current.map_or(0, |s| s.highest_field_id());
    let mut planner =
        Planner { next_id: highest.max(last_column_id) + 1, new_table: current.is_none(), changes: Vec::new() };
    let fields = match current {
        Some(schema) => planner.merge_struct("", schema.as_struct(), source)?,
        None => planner.fresh_struct(source),
    };
    if let (Some(schema), true) = (current, planner.changes.is_empty()) {
        return Ok(Evolution { schema: schema.clone(), changes: Vec::new() });
    }
    let schema_id = current.map_or(0, |s| s.schema_id() + 1);
    let schema = Schema::builder()
        .with_schema_id(schema_id)
        .with_fields(fields)
        .build()
        .map_err(|e| Incompatible { path: String::new(), reason: e.to_string() })?;
    Ok(Evolution { schema, changes: planner.changes })
}

struct Planner {
    next_id: i32,
    new_table: bool,
    changes: Vec<Change>,
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

impl Planner {
    fn id(&mut self) -> i32 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Assigns fresh ids to a whole subtree (pre-order).
    fn fresh_struct(&mut self, s: &StructType) -> Vec<NestedFieldRef> {
        s.fields().iter().map(|f| Arc::new(self.fresh_field(f, f.required))).collect()
    }

    fn fresh_field(&mut self, f: &NestedField, required: bool) -> NestedField {
        let id = self.id();
        let mut field = NestedField::new(id, &f.name, self.fresh_type(&f.field_type), required);
        field.doc = f.doc.clone();
        field
    }

    fn fresh_type(&mut self, t: &Type) -> Type {
        match t {
            Type::Primitive(_) => t.clone(),
            Type::Struct(s) => Type::Struct(StructType::new(self.fresh_struct(s))),
            Type::List(l) => {
                let id = self.id();
                let element = self.fresh_type(&l.element_field.field_type);
                Type::List(ListType::new(Arc::new(NestedField::list_element(id, element, l.element_field.required))))
            }
            Type::Map(m) => {
                let (key_id, value_id) = (self.id(), self.id());
                let key = self.fresh_type(&m.key_field.field_type);
                let value = self.fresh_type(&m.value_field.field_type);
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(key_id, key)),
                    Arc::new(NestedField::map_value_element(value_id, value, m.value_field.required)),
                ))
            }
        }
    }

    fn merge_struct(
        &mut self,
        path: &str,
        current: &StructType,
        source: &StructType,
    ) -> Result<Vec<NestedFieldRef>, Incompatible> {
        let mut out = Vec::with_capacity(current.fields().len());
        for field in current.fields() {
            let field_path = join(path, &field.name);
            match source.field_by_name(&field.name) {
                Some(src) => out.push(Arc::new(self.merge_field(&field_path, field, src)?)),
                None if field.required => {
                    // Gone from the source: kept, null from now on.
                    self.changes.push(Change::MakeOptional { path: field_path, id: field.id });
                    out.push(Arc::new(with_required(field, false)));
                }
                None => out.push(field.clone()),
            }
        }
        for src in source.fields() {
            if current.field_by_name(&src.name).is_some() {
                continue;
            }
            let field_path = join(path, &src.name);
            if src.required && !self.new_table {
                return Err(Incompatible {
                    path: field_path,
                    reason: "a required field cannot be added to an existing table".into(),
                });
            }
            let field = self.fresh_field(src, src.required && self.new_table);
            self.changes.push(Change::AddColumn {
                path: field_path,
                id: field.id,
                field_type: field.field_type.to_string(),
            });
            out.push(Arc::new(field));
        }
        Ok(out)
    }

    fn merge_field(
        &mut self,
        path: &str,
        current: &NestedField,
        source: &NestedField,
    ) -> Result<NestedField, Incompatible> {
        let field_type = self.merge_type(path, current.id, &current.field_type, &source.field_type)?;
        let required = current.required && source.required;
        if current.required && !source.required {
            self.changes.push(Change::MakeOptional { path: path.to_string(), id: current.id });
        }
        let mut field = NestedField::new(current.id, &current.name, field_type, required);
        field.doc = current.doc.clone().or_else(|| source.doc.clone());
        Ok(field)
    }

    fn merge_type(&mut self, path: &str, id: i32, current: &Type, source: &Type) -> Result<Type, Incompatible> {
        let incompatible = |reason: String| Incompatible { path: path.to_string(), reason };
        match (current, source) {
            (Type::Primitive(c), Type::Primitive(s)) => {
                if c == s {
                    return Ok(current.clone());
                }
                if promotable(c, s) {
                    self.changes.push(Change::Promote {
                        path: path.to_string(),
                        id,
                        from: c.to_string(),
                        to: s.to_string(),
                    });
                    return Ok(source.clone());
                }
                // The source narrower than a column promoted earlier is fine: the wider
                // column holds it (an old writer schema after a promotion).
                if promotable(s, c) {
                    return Ok(current.clone());
                }
                Err(incompatible(format!("type {c} cannot become {s}")))
            }
            (Type::Struct(c), Type::Struct(s)) => Ok(Type::Struct(StructType::new(self.merge_struct(path, c, s)?))),
            (Type::List(c), Type::List(s)) => {
                let element_path = join(path, "element");
                let element = self.merge_field(&element_path, &c.element_field, &s.element_field)?;
                Ok(Type::List(ListType::new(Arc::new(element))))
            }
            (Type::Map(c), Type::Map(s)) => {
                if c.key_field.field_type != s.key_field.field_type {
                    return Err(incompatible(format!(
                        "map key type {} cannot become {}",
                        c.key_field.field_type, s.key_field.field_type
                    )));
                }
                let value = self.merge_field(&join(path, "value"), &c.value_field, &s.value_field)?;
                Ok(Type::Map(MapType::new(c.key_field.clone(), Arc::new(value))))
            }
            (c, s) => Err(incompatible(format!("type {c} cannot become {s}"))),
        }
    }
}

/// Iceberg's allowed type promotions.
pub fn promotable(from: &PrimitiveType, to: &PrimitiveType) -> bool {
    match (from, to) {
        (PrimitiveType::Int, PrimitiveType::Long) | (PrimitiveType::Float, PrimitiveType::Double) => true,
        (PrimitiveType::Decimal { precision: p1, scale: s1 }, PrimitiveType::Decimal { precision: p2, scale: s2 }) => {
            s1 == s2 && p2 > p1
        }
        _ => false,
    }
}

fn with_required(field: &NestedField, required: bool) -> NestedField {
    let mut f = field.clone();
    f.required = required;
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: PrimitiveType) -> Type {
        Type::Primitive(t)
    }

    fn source(fields: Vec<NestedField>) -> StructType {
        StructType::new(fields.into_iter().map(Arc::new).collect())
    }

    fn base() -> Schema {
        let s = source(vec![
            NestedField::required(0, "id", p(PrimitiveType::Int)),
            NestedField::optional(0, "price", p(PrimitiveType::Decimal { precision: 9, scale: 2 })),
            NestedField::optional(
                0,
                "tags",
                Type::List(ListType::new(Arc::new(NestedField::list_element(0, p(PrimitiveType::String), true)))),
            ),
            NestedField::optional(
                0,
                "address",
                Type::Struct(source(vec![NestedField::optional(0, "city", p(PrimitiveType::String))])),
            ),
        ]);
        plan(None, &s).unwrap().schema
    }

    #[test]
    fn new_table_gets_ids_in_order() {
        let schema = base();
        let ids: Vec<(String, i32)> = schema.as_struct().fields().iter().map(|f| (f.name.clone(), f.id)).collect();
        assert_eq!(ids, [("id".into(), 1), ("price".into(), 2), ("tags".into(), 3), ("address".into(), 5)]);
        assert_eq!(schema.highest_field_id(), 6);
        assert!(schema.as_struct().fields()[0].required, "a new table keeps required fields");
    }

    #[test]
    fn a_dropped_column_coming_back_gets_a_fresh_id() {
        let schema = base();
        // Another engine dropped `address` (ids 5, 6); the table's last-column-id stays 6.
        let dropped = source(
            schema.as_struct().fields().iter().filter(|f| f.name != "address").map(|f| f.as_ref().clone()).collect(),
        );
        let dropped = Schema::builder().with_schema_id(1).with_fields(dropped.fields().to_vec()).build().unwrap();
        let evolved = plan_above(Some(&dropped), 6, base().as_struct()).unwrap();
        let address = evolved.schema.as_struct().field_by_name("address").unwrap();
        assert_eq!(address.id, 7, "an id dropped is never given again");
        assert_eq!(evolved.schema.highest_field_id(), 8);
    }

    #[test]
    fn same_schema_changes_nothing() {
        let schema = base();
        let again = plan(Some(&schema), schema.as_struct()).unwrap();
        assert!(again.changes.is_empty());
        assert_eq!(again.schema, schema);
    }

    #[test]
    fn compatible_changes_keep_ids() {
        let schema = base();
        let s = source(vec![
            NestedField::required(0, "id", p(PrimitiveType::Long)),
            NestedField::optional(0, "price", p(PrimitiveType::Decimal { precision: 12, scale: 2 })),
            NestedField::optional(
                0,
                "address",
                Type::Struct(source(vec![
                    NestedField::optional(0, "city", p(PrimitiveType::String)),
                    NestedField::optional(0, "zip", p(PrimitiveType::String)),
                ])),
            ),
            NestedField::optional(0, "note", p(PrimitiveType::String)),
        ]);
        let e = plan(Some(&schema), &s).unwrap();
        assert_eq!(
            e.changes,
            vec![
                Change::Promote { path: "id".into(), id: 1, from: "int".into(), to: "long".into() },
                Change::Promote {
                    path: "price".into(),
                    id: 2,
                    from: "decimal(9, 2)".into(),
                    to: "decimal(12, 2)".into()
                },
                Change::AddColumn { path: "address.zip".into(), id: 7, field_type: "string".into() },
                Change::AddColumn { path: "note".into(), id: 8, field_type: "string".into() },
            ]
        );
        let fields = e.schema.as_struct().fields();
        assert_eq!(fields[2].name, "tags", "a removed field stays");
        assert_eq!(fields[2].id, 3);
        assert_eq!(e.schema.schema_id(), 1);
        assert!(!fields[4].required, "added columns are optional");
        // An old writer (int) after the promotion is still fine and changes nothing.
        let old = plan(Some(&e.schema), &source(vec![NestedField::required(0, "id", p(PrimitiveType::Int))])).unwrap();
        assert!(old.changes.iter().all(|c| !matches!(c, Change::Promote { .. })), "{:?}", old.changes);
    }

    #[test]
    fn removed_required_field_becomes_optional() {
        let schema = base();
        let e = plan(
            Some(&schema),
            &source(vec![NestedField::optional(0, "price", p(PrimitiveType::Decimal { precision: 9, scale: 2 }))]),
        )
        .unwrap();
        assert_eq!(e.changes, vec![Change::MakeOptional { path: "id".into(), id: 1 }]);
        assert!(!e.schema.as_struct().fields()[0].required);
    }

    #[test]
    fn incompatible_changes_say_why() {
        let schema = base();
        for (s, path) in [
            (source(vec![NestedField::required(0, "id", p(PrimitiveType::String))]), "id"),
            (
                source(vec![NestedField::optional(0, "price", p(PrimitiveType::Decimal { precision: 9, scale: 3 }))]),
                "price",
            ),
            (source(vec![NestedField::required(0, "created", p(PrimitiveType::Long))]), "created"),
            (source(vec![NestedField::optional(0, "address", p(PrimitiveType::String))]), "address"),
            (
                source(vec![NestedField::optional(
                    0,
                    "tags",
                    Type::List(ListType::new(Arc::new(NestedField::list_element(0, p(PrimitiveType::Int), true)))),
                )]),
                "tags.element",
            ),
        ] {
            let err = plan(Some(&schema), &s).unwrap_err();
            assert_eq!(err.path, path, "{err}");
        }
        // Another type, even one a long converts to, is a change the table cannot take.
        let long = plan(None, &source(vec![NestedField::optional(0, "n", p(PrimitiveType::Long))])).unwrap().schema;
        let err = plan(Some(&long), &source(vec![NestedField::optional(0, "n", p(PrimitiveType::Float))])).unwrap_err();
        assert!(err.to_string().contains("type long cannot become float"), "{err}");
    }

    #[test]
    fn float_becomes_double_and_a_narrower_source_leaves_the_column_wide() {
        let one = |t: PrimitiveType| source(vec![NestedField::optional(0, "x", p(t))]);
        let float = plan(None, &one(PrimitiveType::Float)).unwrap().schema;
        let e = plan(Some(&float), &one(PrimitiveType::Double)).unwrap();
        assert_eq!(
            e.changes,
            vec![Change::Promote { path: "x".into(), id: 1, from: "float".into(), to: "double".into() }]
        );
        assert_eq!(*e.schema.as_struct().fields()[0].field_type, p(PrimitiveType::Double));
        // Narrower sources into columns that were always wide: no change, the column stays.
        for (column, narrower) in [
            (PrimitiveType::Long, PrimitiveType::Int),
            (PrimitiveType::Double, PrimitiveType::Float),
            (PrimitiveType::Decimal { precision: 12, scale: 2 }, PrimitiveType::Decimal { precision: 9, scale: 2 }),
        ] {
            let wide = plan(None, &one(column.clone())).unwrap().schema;
            let e = plan(Some(&wide), &one(narrower)).unwrap();
            assert!(e.changes.is_empty(), "{:?}", e.changes);
            assert_eq!(*e.schema.as_struct().fields()[0].field_type, p(column));
        }
        // A decimal of another scale is not a promotion either way.
        let d = plan(None, &one(PrimitiveType::Decimal { precision: 9, scale: 2 })).unwrap().schema;
        assert!(plan(Some(&d), &one(PrimitiveType::Decimal { precision: 12, scale: 3 })).is_err());
    }
}
