// Message classes of the example protocol (`example-actors/protocol`) the JavaScript ports
// share, in its JSON form.

/** A measurement an actor reports to an observer: `label` = `value`, from actor path `from`. */
export class Report {
  static kind = 'Report';
  constructor(from, label, value) {
    this.from = from;
    this.label = label;
    this.value = value;
  }
}
